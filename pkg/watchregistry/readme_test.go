// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

// The snippets are compiled as the README shows them, not run: nothing
// calls them, and what they leave to the reader they leave unused.
//lint:file-ignore U1000 compiled, not called
//lint:file-ignore SA4006 as the README shows them

// The recipes of README.md, compiled: each function holds one snippet as
// the README shows it, with what the snippet leaves to the reader (a
// queue, clients, the names of objects) as parameters. TestReadmeSnippets
// in examples/goclient checks that every snippet of the README is found
// here, in promcollector (the first, which registers the collector) or in
// package fake.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	clientrecord "k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// readmeOwnWrite is "Own writes".
func readmeOwnWrite(ctx context.Context, reg *watchregistry.Registry[cache.ObjectName], ref watchregistry.Ref, obj metav1.Object,
	client dynamic.ResourceInterface, name string, body []byte, opts metav1.PatchOptions) {
	w := reg.BeginWrite(ref, obj) // obj's namespace and name
	resp, err := client.Patch(ctx, name, types.ApplyPatchType, body, opts)
	w.End(resp, err) // or w.Done(resp) / w.Abort()
}

// availability digests what the owner reports of a Deployment: whether it is
// Available, and why not.
func availability(u *unstructured.Unstructured) uint64 {
	h := fnv.New64a()
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Available" {
			fmt.Fprintf(h, "%v\x00%v\x00%v", m["status"], m["reason"], m["message"])
		}
	}
	return h.Sum64()
}

// readmeWakeDigest is "Waking on a condition".
func readmeWakeDigest(queue workqueue.TypedInterface[cache.ObjectName]) (*watchregistry.Registry[cache.ObjectName], error) {
	reg, err := watchregistry.New(watchregistry.Options[cache.ObjectName]{
		// ...
		WakeDigest: availability,
		Enqueue: func(key cache.ObjectName, ev watchregistry.Event) {
			// EventDigestChanged: only the health moved; EventUpdated: drift.
			queue.Add(key)
		},
	})
	return reg, err
}

// readmeBudget is "Object budgets".
func readmeBudget(reg *watchregistry.Registry[cache.ObjectName], dyn, dyn2 dynamic.Interface) {
	b := watchregistry.NewBudget(20000, watchregistry.MaxBytes(64<<20), watchregistry.BudgetName("tenant-a"))
	reg.SetCluster("tenant-a/prod", dyn, nil, watchregistry.WithBudget(b))
	reg.SetCluster("tenant-a/staging", dyn2, nil, watchregistry.WithBudget(b)) // shared
}

// readmeObjectsYouDontOwn is the recipe "Objects you don't own".
func readmeObjectsYouDontOwn(queue workqueue.TypedInterface[cache.ObjectName], secretsGVR schema.GroupVersionResource,
	key cache.ObjectName, annotate func(cache.ObjectName, string, string)) error {
	in := watchregistry.NewInterests[cache.ObjectName]()
	reg, err := watchregistry.New(watchregistry.Options[cache.ObjectName]{
		MetadataOnly: true,        // no Secret data in the cache
		Map:          in.Map(nil), // or in.Map(yourMap): both, each owner once
		Enqueue:      func(key cache.ObjectName, _ watchregistry.Event) { queue.Add(key) },
		RetryFailed:  true,
	})

	// In the reconcile of the ConfigMap key, which names "db" and "tls":
	ref := watchregistry.Ref{GVR: secretsGVR, Namespace: key.Namespace}
	refs := in.Set(key, []watchregistry.Interest{{Ref: ref, Name: "db"}, {Ref: ref, Name: "tls"}})
	err = reg.Track(key, refs)                   // after Set: an event between them finds the owner
	db, err := reg.Get(ref, key.Namespace, "db") // its metadata, from the cache
	if err != nil {
		return err // ErrNotSynced: the owner is woken once listed
	}
	annotate(key, "db-version", db.GetResourceVersion())

	// When the ConfigMap is gone:
	in.Forget(key)
	reg.Forget(key)
	return nil
}

// readmeForbidden is the recipe "Reporting Forbidden to your users".
func readmeForbidden(reg *watchregistry.Registry[cache.ObjectName], ref watchregistry.Ref, ns, name string,
	recorder clientrecord.EventRecorder, owner runtime.Object,
	setCondition func(runtime.Object, string, metav1.ConditionStatus, string, string) error,
	compare func(runtime.Object, *unstructured.Unstructured) error) error {
	obj, err := reg.Get(ref, ns, name)
	switch {
	case errors.Is(err, watchregistry.ErrForbidden):
		recorder.Eventf(owner, corev1.EventTypeWarning, "Forbidden", "cannot watch %s: %v", ref, err)
		return setCondition(owner, "Ready", metav1.ConditionFalse, "Forbidden", err.Error())
	case errors.Is(err, watchregistry.ErrNotSynced):
		return nil // woken once listed, or once the retry fails again
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	return compare(owner, obj) // obj is nil when it does not exist
}

// registrySource feeds a controller-runtime controller from a registry
// whose owners are its requests: R is reconcile.Request.
type registrySource[R comparable] struct {
	reg   *watchregistry.Registry[R]
	queue atomic.Pointer[workqueue.TypedRateLimitingInterface[R]]
}

// enqueue is the registry's Options.Enqueue.
func (s *registrySource[R]) enqueue(req R, _ watchregistry.Event) {
	if q := s.queue.Load(); q != nil {
		(*q).Add(req)
	}
}

// Start implements source.TypedSource[R].
func (s *registrySource[R]) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[R]) error {
	s.queue.Store(&q)
	return s.reg.Start(ctx)
}

// In the reconciler: s.reg.Track(req, refs) after applying, s.reg.Forget(req)
// on delete. Wire it with
// builder.ControllerManagedBy(mgr).For(&myv1.App{}).WatchesRawSource(src).
var _ = (&registrySource[cache.ObjectName]{}).enqueue

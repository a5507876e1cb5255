// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package promcollector_test

// The snippets are compiled as the README shows them, not run: nothing
// calls them, and what they leave to the reader they leave unused.
//lint:file-ignore U1000 compiled, not called
//lint:file-ignore SA4006 as the README shows them

import (
	"context"
	"errors"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
	"github.com/vidra-operator/vidra/pkg/watchregistry/promcollector"
)

// readmeUse is the "Use" section of the watch registry's README, compiled:
// what the snippet leaves to the reader is a parameter. It lives here
// because it registers the collector.
func readmeUse(ctx context.Context, queue workqueue.TypedInterface[cache.ObjectName], logger logr.Logger,
	dynamicClient dynamic.Interface, metadataClient metadata.Interface,
	owner cache.ObjectName, refs []watchregistry.Ref, ref watchregistry.Ref, ns, name string,
	client dynamic.ResourceInterface, cfg *unstructured.Unstructured, opts metav1.ApplyOptions, live metav1.Object) error {
	reg, err := watchregistry.New(watchregistry.Options[cache.ObjectName]{
		LabelSelector: "app.kubernetes.io/managed-by=my-operator", // cache only what you manage
		Map: func(ev watchregistry.Event) []cache.ObjectName { // object -> owners
			owner, err := cache.ParseObjectName(ev.Object.GetAnnotations()["example.com/owner"])
			if err != nil {
				return nil
			}
			return []cache.ObjectName{owner}
		},
		Enqueue:     func(key cache.ObjectName, _ watchregistry.Event) { queue.Add(key) },
		RetryFailed: true, // Forbidden and Gone informers retry by themselves
		Logger:      logger,
	})
	reg.SetCluster("", dynamicClient, metadataClient)   // "" is the local cluster; add remote ones by name
	prometheus.MustRegister(promcollector.New(reg, "")) // optional: package promcollector
	if err := reg.Start(ctx); err != nil {              // or go reg.Run(ctx), which blocks
		return err
	}
	defer func() { <-reg.Done() }() // closed once ctx is done and every informer has exited

	// In each reconcile of an owner, after applying its objects:
	err = reg.Track(owner, refs)       // refs: every {Cluster, GVR, Namespace} its objects live in
	obj, err := reg.Get(ref, ns, name) // or watchregistry.GetTyped[appsv1.Deployment](reg, ref, ns, name)
	switch {
	case errors.Is(err, watchregistry.ErrForbidden), errors.Is(err, watchregistry.ErrGone):
		// report it; it retries by itself (RetryFailed), or on a Track after the backoff
	case errors.Is(err, watchregistry.ErrNotSynced):
		return nil // the owner is enqueued with EventInitialList once the cache is ready
	case apierrors.IsNotFound(err):
		// the object does not exist
	}
	// Around each write: don't wake yourself up.
	w := reg.BeginWrite(ref, obj) // before sending: its namespace and name
	applied, err := client.Apply(ctx, name, cfg, opts)
	w.End(applied, err)         // Done(applied) on success, Abort() on error
	reg.ExpectDelete(ref, live) // before deleting: its namespace, name and UID
	if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		reg.UnexpectDelete(ref, live) // the delete failed: someone else's must wake you
	}

	// When the owner is gone:
	reg.Forget(owner)
	return nil
}

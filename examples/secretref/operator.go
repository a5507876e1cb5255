// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package secretref

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

const (
	// SecretsAnnotation names the Secrets of the ConfigMap's namespace, by
	// comma-separated name.
	SecretsAnnotation = "example.com/secrets"
	// SeenAnnotation is where the operator writes what it saw of them.
	SeenAnnotation = "example.com/seen"
	// maxSecrets bounds the names one ConfigMap may give: each is an
	// interest and a read per reconcile.
	maxSecrets = 16
)

var secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// Operator reconciles the ConfigMaps of one namespace.
type Operator struct {
	cs        kubernetes.Interface
	namespace string
	log       logr.Logger

	factory    informers.SharedInformerFactory
	configMaps corelisters.ConfigMapLister
	synced     cache.InformerSynced
	reg        *watchregistry.Registry[cache.ObjectName]
	interests  *watchregistry.Interests[cache.ObjectName]
	queue      workqueue.TypedRateLimitingInterface[cache.ObjectName]
}

// New builds the operator of namespace's ConfigMaps.
func New(cs kubernetes.Interface, md metadata.Interface, namespace string, log logr.Logger) (*Operator, error) {
	o := &Operator{
		cs: cs, namespace: namespace, log: log,
		interests: watchregistry.NewInterests[cache.ObjectName](),
		// The default controller rate limiter: per-item exponential backoff
		// and an overall bucket, as sample-controller uses.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "secretref"}),
	}
	o.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	cms := o.factory.Core().V1().ConfigMaps()
	o.configMaps, o.synced = cms.Lister(), cms.Informer().HasSynced
	if _, err := cms.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    o.enqueueObject,
		UpdateFunc: func(_, obj any) { o.enqueueObject(obj) },
		DeleteFunc: o.enqueueObject,
	}); err != nil {
		return nil, err
	}
	reg, err := watchregistry.New(watchregistry.Options[cache.ObjectName]{
		// Secrets are not ours to label: no selector, and metadata only,
		// so that no Secret data is cached. A data change is still
		// delivered (see the registry's MetadataOnly).
		MetadataOnly: true,
		Map:          o.interests.Map(nil),
		Enqueue:      func(key cache.ObjectName, _ watchregistry.Event) { o.queue.Add(key) },
		RetryFailed:  true,
		Logger:       log.WithName("watchregistry"),
	})
	if err != nil {
		return nil, err
	}
	reg.SetCluster("", nil, md)
	o.reg = reg
	return o, nil
}

func (o *Operator) enqueueObject(obj any) {
	if key, err := cache.DeletionHandlingObjectToName(obj); err == nil {
		o.queue.Add(key)
	}
}

// Run reconciles until ctx is done, with the given number of workers.
func (o *Operator) Run(ctx context.Context, workers int) error {
	defer o.queue.ShutDown()
	if err := o.reg.Start(ctx); err != nil {
		return err
	}
	defer func() { <-o.reg.Done() }()
	o.factory.Start(ctx.Done())
	defer o.factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), o.synced) {
		return ctx.Err()
	}
	for range workers {
		go wait.UntilWithContext(ctx, o.worker, time.Second)
	}
	<-ctx.Done()
	return nil
}

func (o *Operator) worker(ctx context.Context) {
	for o.next(ctx) {
	}
}

func (o *Operator) next(ctx context.Context) bool {
	key, quit := o.queue.Get()
	if quit {
		return false
	}
	defer o.queue.Done(key)
	if err := o.sync(ctx, key); err != nil {
		o.log.Error(err, "Reconcile failed", "configmap", key)
		o.queue.AddRateLimited(key)
		return true
	}
	o.queue.Forget(key)
	return true
}

// sync declares the ConfigMap's interest in the Secrets it names, reads
// them from the registry's cache and records what it saw.
func (o *Operator) sync(ctx context.Context, key cache.ObjectName) error {
	cm, err := o.configMaps.ConfigMaps(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		o.interests.Forget(key)
		o.reg.Forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	names := secretNames(cm.Annotations[SecretsAnnotation])
	ref := watchregistry.Ref{GVR: secretsGVR, Namespace: key.Namespace}
	want := make([]watchregistry.Interest, 0, len(names))
	for _, n := range names {
		want = append(want, watchregistry.Interest{Ref: ref, Name: n})
	}
	// Interests first, then Track: an event between them finds the owner.
	if err := o.reg.Track(key, o.interests.Set(key, want)); err != nil {
		return err
	}
	seen := make([]string, 0, len(names))
	for _, n := range names {
		s, err := o.reg.Get(ref, key.Namespace, n)
		switch {
		case errors.Is(err, watchregistry.ErrForbidden), errors.Is(err, watchregistry.ErrGone):
			return fmt.Errorf("read Secret %s/%s: %w", key.Namespace, n, err)
		case errors.Is(err, watchregistry.ErrNotSynced):
			return nil // woken with EventInitialList once listed
		case apierrors.IsNotFound(err):
			seen = append(seen, n+"=absent")
		case err != nil:
			return err
		default:
			seen = append(seen, n+"="+s.GetResourceVersion())
		}
	}
	value := strings.Join(seen, ",")
	if cm.Annotations[SeenAnnotation] == value {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, SeenAnnotation, value)
	_, err = o.cs.CoreV1().ConfigMaps(key.Namespace).Patch(ctx, key.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// secretNames parses the annotation: distinct, non-empty names, sorted, at
// most maxSecrets of them.
func secretNames(s string) []string {
	var out []string
	for n := range strings.SplitSeq(s, ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), maxSecrets)]
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package sourcewatch

import (
	"context"
	"fmt"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Object names one watched object.
type Object struct {
	Resource  schema.GroupVersionResource
	Namespace string
	Name      string
}

// Bounds of the watches: each is an informer of its own (a list, a watch
// and some goroutines), which tenants start by naming objects. A resource
// names at most 16 (the CRD's bound on spec.manifestFrom); its namespace's
// resources together at most PerNamespace distinct objects, and the whole
// operator watches at most Total.
const (
	PerNamespace = 512
	Total        = 4096
)

// Watcher watches the objects resources name and wakes them on a change.
type Watcher struct {
	md      metadata.Interface
	enqueue func(cache.ObjectName)
	// perNamespace and total are the bounds Set keeps.
	perNamespace, total int

	mu sync.Mutex
	// ctx is Run's; until it runs, watches are recorded and not started.
	ctx     context.Context
	watches map[Object]*watch
	uses    map[cache.ObjectName][]Object
	wg      sync.WaitGroup
}

type watch struct {
	users  map[cache.ObjectName]bool
	cancel context.CancelFunc
	synced cache.InformerSynced
}

// New returns a Watcher that watches with md and wakes resources with
// enqueue.
func New(md metadata.Interface, enqueue func(cache.ObjectName)) *Watcher {
	return &Watcher{md: md, enqueue: enqueue, perNamespace: PerNamespace, total: Total,
		watches: map[Object]*watch{}, uses: map[cache.ObjectName][]Object{}}
}

// LimitError is the error of a Set that would have gone past a bound.
type LimitError struct {
	// Namespace is the namespace past its bound, "" for the total.
	Namespace string
	// Limit is the bound, Need what the Set would have needed.
	Limit, Need int
}

// Error implements error.
func (e *LimitError) Error() string {
	if e.Namespace == "" {
		return fmt.Sprintf("Vidra would watch %d sources of manifests, more than the %d it watches in all", e.Need, e.Limit)
	}
	return fmt.Sprintf("the resources of namespace %s would have Vidra watch %d sources of manifests (spec.manifestFrom), more than the %d a namespace may", e.Namespace, e.Need, e.Limit)
}

// fitsLocked checks that key may name objs: that the distinct objects its
// namespace's resources name, and all of them, stay within the bounds, or
// do not grow (a bound lowered under what is watched stops nobody from
// keeping or dropping what it has).
func (w *Watcher) fitsLocked(key cache.ObjectName, objs []Object) error {
	fresh := map[Object]bool{}
	for _, o := range objs {
		if _, ok := w.watches[o]; !ok {
			fresh[o] = true
		}
	}
	added := len(fresh)
	if added == 0 {
		return nil
	}
	// What leaves with key's old objects is not counted as room: another
	// resource may take it before this one's Set lands, and the bound
	// is about what runs.
	if need := len(w.watches) + added; w.total > 0 && need > w.total {
		return &LimitError{Limit: w.total, Need: need}
	}
	if w.perNamespace <= 0 {
		return nil
	}
	inNamespace := 0
	for o := range w.watches {
		if o.Namespace == key.Namespace {
			inNamespace++
		}
	}
	if need := inNamespace + added; need > w.perNamespace {
		return &LimitError{Namespace: key.Namespace, Limit: w.perNamespace, Need: need}
	}
	return nil
}

// Run starts the watches recorded so far and those set later, under ctx,
// and returns once ctx has ended and every watch has stopped.
func (w *Watcher) Run(ctx context.Context) {
	w.mu.Lock()
	w.ctx = ctx
	for obj, wt := range w.watches {
		w.startLocked(obj, wt)
	}
	w.mu.Unlock()
	<-ctx.Done()
	w.wg.Wait()
}

// Set makes objs the objects key is woken for, and stops watching those
// nobody names any more. A Set that would start watches past a bound fails
// with a *LimitError and changes nothing. Objects are named in key's own
// namespace (spec.manifestFrom reads there), which the namespace's bound
// counts.
func (w *Watcher) Set(key cache.ObjectName, objs []Object) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.uses[key]
	if slices.Equal(old, objs) {
		return nil
	}
	if err := w.fitsLocked(key, objs); err != nil {
		return err
	}
	for _, o := range old {
		if !slices.Contains(objs, o) {
			w.dropLocked(key, o)
		}
	}
	for _, o := range objs {
		wt, ok := w.watches[o]
		if !ok {
			wt = &watch{users: map[cache.ObjectName]bool{}}
			w.watches[o] = wt
			w.startLocked(o, wt)
		}
		wt.users[key] = true
	}
	if len(objs) == 0 {
		delete(w.uses, key)
		return nil
	}
	w.uses[key] = slices.Clone(objs)
	return nil
}

// Forget stops waking key.
func (w *Watcher) Forget(key cache.ObjectName) { _ = w.Set(key, nil) }

// Watching returns how many objects are watched.
func (w *Watcher) Watching() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.watches)
}

// HasSynced reports whether the watches of key's objects have listed.
func (w *Watcher) HasSynced(key cache.ObjectName) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range w.uses[key] {
		if wt := w.watches[o]; wt.synced == nil || !wt.synced() {
			return false
		}
	}
	return true
}

func (w *Watcher) dropLocked(key cache.ObjectName, o Object) {
	wt, ok := w.watches[o]
	if !ok {
		return
	}
	delete(wt.users, key)
	if len(wt.users) == 0 {
		if wt.cancel != nil {
			wt.cancel()
		}
		delete(w.watches, o)
	}
}

// startLocked starts the watch of o, once Run has given a context.
func (w *Watcher) startLocked(o Object, wt *watch) {
	if w.ctx == nil || wt.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(w.ctx)
	wt.cancel = cancel
	selector := fields.OneTermEqualSelector("metadata.name", o.Name).String()
	inf := metadatainformer.NewFilteredMetadataInformer(w.md, o.Resource, o.Namespace, 0, cache.Indexers{},
		func(lo *metav1.ListOptions) { lo.FieldSelector = selector }).Informer()
	// Name and version are all a change is told by; labels, annotations
	// and managedFields are dropped.
	_ = inf.SetTransform(func(obj any) (any, error) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
				Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}}, nil
		}
		return obj, nil
	})
	wake := func() {
		w.mu.Lock()
		var keys []cache.ObjectName
		if cur, ok := w.watches[o]; ok && cur == wt {
			for k := range wt.users {
				keys = append(keys, k)
			}
		}
		w.mu.Unlock()
		for _, k := range keys {
			w.enqueue(k)
		}
	}
	// An object in the first list wakes its users too: it may have been
	// created between their reconcile's read and this watch's start.
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { wake() },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*metav1.PartialObjectMetadata)
			n, ok2 := newObj.(*metav1.PartialObjectMetadata)
			if ok1 && ok2 && o.ResourceVersion == n.ResourceVersion {
				return // a resync
			}
			wake()
		},
		DeleteFunc: func(any) { wake() },
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Watching a source of manifests failed", "object", o)
		return
	}
	wt.synced = inf.HasSynced
	w.wg.Go(func() { inf.RunWithContext(ctx) })
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// secretSyncWait bounds how long a reconcile waits for a newly started
// Secret informer; past it, resolve fails (and retries with backoff) rather
// than hold a shared worker.
const secretSyncWait = 5 * time.Second

var secretsResource = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// secretInformer watches the metadata of the Secrets of one namespace: names,
// resourceVersions and the earlier operator's label, never their data, so
// that it costs little memory and reads nothing secret.
type secretInformer struct {
	namespace string
	informer  cache.SharedIndexInformer
	cancel    context.CancelFunc
	started   time.Time

	mu      sync.Mutex
	lastErr error
}

// startInformerLocked starts the Secret informer of a namespace, whose
// events requeue the resources that use a Secret there.
func (r *remotes) startInformerLocked(namespace string) (*secretInformer, error) {
	inf := metadatainformer.NewFilteredMetadataInformer(r.md, secretsResource, namespace, 0, cache.Indexers{}, nil).Informer()
	s := &secretInformer{namespace: namespace, informer: inf, started: r.clock.Now()}
	if err := inf.SetTransform(trimSecretMetadata); err != nil {
		return nil, fmt.Errorf("watch Secrets in namespace %s: %w", namespace, err)
	}
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		klog.FromContext(ctx).V(2).Info("Listing or watching Secrets failed; retrying", "namespace", namespace, "err", err)
	}); err != nil {
		return nil, fmt.Errorf("watch Secrets in namespace %s: %w", namespace, err)
	}
	changed := func(old, cur *metav1.PartialObjectMetadata, deleted bool) {
		m := cur
		if m == nil {
			m = old
		}
		labelled := old != nil && old.Labels[legacyLabel] != "" || cur != nil && cur.Labels[legacyLabel] != ""
		r.secretChanged(m.Namespace, m.Name, labelled, deleted)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			// The initial list only fills the cache the first lookup waits for.
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok && !isInInitialList {
				changed(nil, m, false)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*metav1.PartialObjectMetadata)
			cur, ok2 := newObj.(*metav1.PartialObjectMetadata)
			if ok1 && ok2 && old.ResourceVersion != cur.ResourceVersion {
				changed(old, cur, false)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
				changed(m, nil, true)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("watch Secrets in namespace %s: %w", namespace, err)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	s.cancel = cancel
	r.informers[namespace] = s
	r.wg.Go(func() { inf.RunWithContext(ctx) })
	klog.FromContext(ctx).V(2).Info("Watching Secrets for remote destinations", "namespace", namespace)
	return s, nil
}

// stopInformerIfUnusedLocked stops the Secret informer of a namespace no
// resource looks up a Secret in any more.
func (r *remotes) stopInformerIfUnusedLocked(namespace string) {
	s := r.informers[namespace]
	if s == nil {
		return
	}
	for _, u := range r.users {
		if u.namespace == namespace {
			return
		}
	}
	s.cancel()
	delete(r.informers, namespace)
}

// trimSecretMetadata keeps what lookups and change detection need; the rest
// of the metadata (managedFields, and annotations, where kubectl copies a
// whole Secret, data included) is never cached.
func trimSecretMetadata(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
	}}
	if v, ok := m.Labels[legacyLabel]; ok {
		out.Labels = map[string]string{legacyLabel: v}
	}
	return out, nil
}

// waitSynced waits, within secretSyncWait of the informer's start, for its
// first list; after that it fails at once, naming the last list error (a
// missing permission, most likely).
func (s *secretInformer) waitSynced(ctx context.Context, clk clock.PassiveClock) error {
	if s.informer.HasSynced() {
		return nil
	}
	if left := s.started.Add(secretSyncWait).Sub(clk.Now()); left > 0 {
		_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, left, true, func(context.Context) (bool, error) {
			return s.informer.HasSynced(), nil
		})
		if s.informer.HasSynced() {
			return nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastErr != nil {
		return fmt.Errorf("cannot list Secrets in namespace %s: %w", s.namespace, s.lastErr)
	}
	return fmt.Errorf("the Secrets of namespace %s are not listed yet", s.namespace)
}

func (s *secretInformer) get(name string) *metav1.PartialObjectMetadata {
	obj, ok, err := s.informer.GetStore().GetByKey(s.namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	return obj.(*metav1.PartialObjectMetadata)
}

// labelled returns the Secrets carrying the earlier operator's label for
// host, in name order.
func (s *secretInformer) labelled(host string) []*metav1.PartialObjectMetadata {
	var out []*metav1.PartialObjectMetadata
	for _, obj := range s.informer.GetStore().List() {
		if m := obj.(*metav1.PartialObjectMetadata); m.Labels[legacyLabel] == host {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *metav1.PartialObjectMetadata) int { return strings.Compare(a.Name, b.Name) })
	return out
}

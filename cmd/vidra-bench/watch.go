// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// timedEvent is a watch event and the moment the benchmark received it.
type timedEvent struct {
	watch.Event
	at time.Time
}

// subscription collects the events of one object from the moment it is
// registered, so that an event that arrives before the change request has
// even returned (a fast repair) is not lost.
type subscription struct {
	mu     sync.Mutex
	events []timedEvent
	wake   chan struct{}
}

func (s *subscription) add(ev timedEvent) {
	s.mu.Lock()
	s.events = append(s.events, ev)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// firstAt is the arrival of the first event since the subscription began,
// which, with nobody else writing the object, is the change itself.
func (s *subscription) firstAt() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.events) == 0 {
		return time.Time{}, false
	}
	return s.events[0].at, true
}

// await returns the arrival time of the first event that match accepts,
// looking at every event since the subscription began.
func (s *subscription) await(ctx context.Context, timeout time.Duration, match func(watch.Event) bool) (time.Time, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := 0
	for {
		s.mu.Lock()
		pending := s.events[seen:]
		seen = len(s.events)
		s.mu.Unlock()
		for _, ev := range pending {
			if match(ev.Event) {
				return ev.at, true
			}
		}
		select {
		case <-s.wake:
		case <-deadline.C:
			return time.Time{}, false
		case <-ctx.Done():
			return time.Time{}, false
		}
	}
}

// hub runs one watch per resource type over every namespace, limited to
// Vidra's managed objects, and hands each event to the subscription of its
// object, if any.
type hub struct {
	mu   sync.Mutex
	subs map[string]*subscription
}

func subKey(resource, ns, name string) string { return resource + "/" + ns + "/" + name }

func newHub() *hub { return &hub{subs: map[string]*subscription{}} }

func (h *hub) subscribe(resource, ns, name string) *subscription {
	s := &subscription{wake: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[subKey(resource, ns, name)] = s
	h.mu.Unlock()
	return s
}

func (h *hub) unsubscribe(resource, ns, name string) {
	h.mu.Lock()
	delete(h.subs, subKey(resource, ns, name))
	h.mu.Unlock()
}

// watchResource starts a retrying watch of one resource type; it stops with
// ctx. lw lists and watches that type in every namespace.
func (h *hub) watchResource(ctx context.Context, resource string, lw *cache.ListWatch) error {
	list, err := lw.ListWithContext(ctx, metav1.ListOptions{LabelSelector: managedSelector, Limit: 1})
	if err != nil {
		return fmt.Errorf("list %s: %w", resource, err)
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return err
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, lm.GetResourceVersion(), lw)
	if err != nil {
		return fmt.Errorf("watch %s: %w", resource, err)
	}
	go func() {
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				at := time.Now()
				m, err := meta.Accessor(ev.Object)
				if err != nil {
					continue
				}
				h.mu.Lock()
				s := h.subs[subKey(resource, m.GetNamespace(), m.GetName())]
				h.mu.Unlock()
				if s != nil {
					s.add(timedEvent{Event: ev, at: at})
				}
			}
		}
	}()
	return nil
}

// managedSelector selects the objects Vidra manages.
const managedSelector = v1alpha1.ManagedByLabel + "=" + v1alpha1.ManagedByValue

// startHub watches the three resource types the drift measurement changes.
func startHub(ctx context.Context, kube kubernetes.Interface) (*hub, error) {
	h := newHub()
	withSelector := func(o *metav1.ListOptions) { o.LabelSelector = managedSelector }
	lws := map[string]*cache.ListWatch{
		"configmaps": {
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				withSelector(&o)
				return kube.CoreV1().ConfigMaps("").List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				withSelector(&o)
				return kube.CoreV1().ConfigMaps("").Watch(ctx, o)
			},
		},
		"services": {
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				withSelector(&o)
				return kube.CoreV1().Services("").List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				withSelector(&o)
				return kube.CoreV1().Services("").Watch(ctx, o)
			},
		},
		"deployments": {
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				withSelector(&o)
				return kube.AppsV1().Deployments("").List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				withSelector(&o)
				return kube.AppsV1().Deployments("").Watch(ctx, o)
			},
		},
	}
	for resource, lw := range lws {
		if err := h.watchResource(ctx, resource, lw); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// rvAfter reports whether the object's resourceVersion is later than rv.
// Resource versions are opaque to clients in general; the benchmark relies on
// kube-apiserver's, which are etcd revisions and grow.
func rvAfter(obj runtime.Object, rv string) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	a, err1 := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	b, err2 := strconv.ParseUint(rv, 10, 64)
	return err1 == nil && err2 == nil && a > b
}

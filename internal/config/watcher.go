// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Watcher follows one ConfigMap and publishes the Config it holds.
type Watcher struct {
	current   atomic.Pointer[Config]
	informer  cache.SharedIndexInformer
	recorder  record.EventRecorder
	listeners []Listener
	namespace string
	name      string
}

// Listener is told of every Config published, from the watcher's informer
// goroutine.
type Listener interface {
	ConfigChanged(old, cur *Config)
}

// NewWatcher watches ConfigMap namespace/name through an informer limited to
// that one object. recorder may be nil.
func NewWatcher(client kubernetes.Interface, namespace, name string, recorder record.EventRecorder) (*Watcher, error) {
	w := &Watcher{recorder: recorder, namespace: namespace, name: name}
	w.current.Store(Default())
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	w.informer = factory.Core().V1().ConfigMaps().Informer()
	_, err := w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.update(obj) },
		UpdateFunc: func(_, obj any) { w.update(obj) },
		DeleteFunc: func(any) { w.publish(Default()) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch ConfigMap %s/%s: %w", namespace, name, err)
	}
	return w, nil
}

// Listen has l told of every change published from now on; call it before
// Run. The controller reads the Config as it is built, and listens once it
// exists, hence a call rather than an argument of NewWatcher.
func (w *Watcher) Listen(l Listener) { w.listeners = append(w.listeners, l) }

// Run runs the informer until ctx ends.
func (w *Watcher) Run(ctx context.Context) { w.informer.RunWithContext(ctx) }

// HasSynced reports whether the first list of the ConfigMap arrived, so that
// the controller does not start reconciling with defaults it then changes.
func (w *Watcher) HasSynced() bool { return w.informer.HasSynced() }

// Current returns the Config in force; callers must not modify it.
func (w *Watcher) Current() *Config { return w.current.Load() }

func (w *Watcher) update(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	cfg, problems := Parse(cm.Data, w.Current())
	logger := klog.Background().WithValues("configmap", klog.KObj(cm))
	for _, p := range problems {
		// Warnings, not errors: the operator goes on with a setting it
		// knows, and a person fixes the ConfigMap when it suits them.
		if p.Warning {
			logger.Info("Configuration key ignored", "severity", "warning", "key", p.Key, "reason", p.Message)
			if w.recorder != nil {
				w.recorder.Event(cm, corev1.EventTypeWarning, "ConfigIgnored", p.String())
			}
			continue
		}
		logger.Info("Invalid configuration value; keeping the previous setting", "severity", "warning", "key", p.Key, "value", p.Value, "reason", p.Message)
		if w.recorder != nil {
			w.recorder.Event(cm, corev1.EventTypeWarning, "InvalidConfig", p.String())
		}
	}
	w.publish(cfg)
}

func (w *Watcher) publish(cfg *Config) {
	old := w.current.Swap(cfg)
	// Every change a person makes is worth a line; the informer's resyncs
	// and no-op edits are not.
	logger := klog.Background().V(1)
	if old == nil || !reflect.DeepEqual(*old, *cfg) {
		logger = klog.Background()
	}
	logger.Info("Configuration applied", "requeueResourcesAfter", cfg.RequeueAfter,
		"eventBasedReconcile", cfg.EventBased, "requeueJitter", cfg.Jitter, "overrideManagers", cfg.OverrideManagers)
	for _, l := range w.listeners {
		l.ConfigChanged(old, cfg)
	}
}

// Jittered returns d stretched by a random fraction of up to jitter, so that
// resources created together spread their periodic re-checks.
func Jittered(d time.Duration, jitter float64, rand func() float64) time.Duration {
	if d <= 0 || !(jitter > 0) {
		return d
	}
	// A float past the largest duration converts to a negative one, and a
	// negative delay means no re-check at all: an interval of millions of
	// hours saturates instead.
	extra := float64(d) * jitter * rand()
	if extra >= float64(math.MaxInt64-d) {
		return math.MaxInt64
	}
	return d + time.Duration(extra)
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/cachecharge"
	"github.com/vidra-operator/vidra/internal/config"
	"github.com/vidra-operator/vidra/internal/wakequeue"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	listers "github.com/vidra-operator/vidra/pkg/generated/listers/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// Wakes is what wakes a VidraResource, and the work queue it wakes into:
// the watch registry's Map, Enqueue, Keep, Charge and Transform, which route
// the events of managed objects to their owners, and the Enqueue of the
// destination resolver, the apply engine and the sources of manifestFrom.
// Built before all of them (it reads the engine's WakeIndex, not the
// engine), it is handed to each and to the Controller, which embeds it.
type Wakes struct {
	queue *wakequeue.Queue
	share *share
	// health paces the reconciles woken by changes of health alone.
	health *wakequeue.Pacer
	clock  clock.WithTicker
	lister listers.VidraResourceLister
	config func() *config.Config
	index  *apply.WakeIndex
	// budgets are the namespaces' cache budgets (charge).
	budgets *cachecharge.Budgets
	// uids are the UIDs of the resources the informer holds, which tell
	// whether an object's owner still exists; partialView, that the
	// informer holds only some (Resources).
	uids        *resourceUIDs
	partialView bool
}

// Event queues key for a change of something it reads: the Enqueue of the
// resolver, the engine and the sources of manifestFrom.
func (w *Wakes) Event(key cache.ObjectName) { w.enqueue(key, TriggerEvent) }

// Resources reports whether a VidraResource of uid exists, and whether the
// answer is complete: the engine's Options.Resources. Reconciles start
// once the informer has listed: the set holds every resource the informer
// may.
func (w *Wakes) Resources(uid types.UID) (exists, known bool) {
	return w.uids.has(uid), !w.partialView
}

// keep is the registry's Keep: objects labelled by someone else without an
// owner are not even listed (objectSelector); this drops those whose owner
// is not a VidraResource.
func (w *Wakes) keep(u *unstructured.Unstructured) bool {
	_, ok := apply.MarkedOwner(w.lister, u)
	return ok
}

// transform is the registry's Transform.
func (w *Wakes) transform(u *unstructured.Unstructured) error {
	apply.TrimForCache(u, w.config().OverrideManagers)
	return nil
}

// wake queues the owner of a managed object for a watch event of it: at
// once for a change of the object, paced for a change of its health alone
// (healthChanged).
func (w *Wakes) wake(key cache.ObjectName, ev watchregistry.Event) {
	switch ev.Type {
	case watchregistry.EventInitialList:
		// A new informer's first list is no change anyone made: after a
		// restart it is part of starting up.
		w.enqueue(key, TriggerStartup)
	case watchregistry.EventDigestChanged:
		w.healthChanged(key, ev)
	default:
		w.enqueue(key, TriggerEvent)
	}
}

func (w *Wakes) enqueueObject(obj any, t Trigger) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	key, err := cache.ObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	w.enqueue(key, t)
}

func (w *Wakes) enqueue(key cache.ObjectName, t Trigger) {
	if !w.share.owns(key) {
		w.miss(key, t)
		return
	}
	w.queue.Add(key, t)
}

func (w *Wakes) enqueueAfter(key cache.ObjectName, t Trigger, d time.Duration) {
	if !w.share.owns(key) {
		// Missed, it is reconciled when the share has settled: sooner
		// than asked, which a level-triggered reconcile allows.
		w.miss(key, t)
		return
	}
	w.queue.AddAfter(key, t, d)
}

// ownerOf maps a watch event of a managed object to the VidraResource named in
// its owned-by annotation, if that resource corrects drift on events.
func (w *Wakes) ownerOf(ev watchregistry.Event) []cache.ObjectName {
	if ev.Object == nil {
		return nil
	}
	vr, ok := apply.MarkedOwner(w.lister, ev.Object)
	// Health changes wake the owner whether or not it corrects drift on
	// events: waiting for health never polls.
	if !ok || (!w.eventMode(vr) && ev.Type != watchregistry.EventDigestChanged) {
		return nil
	}
	key := cache.MetaObjectToName(vr)
	obj := apply.WatchedObject{GVR: ev.Ref.GVR, Namespace: ev.Object.GetNamespace(), Name: ev.Object.GetName()}
	if !w.index.WakesFrom(key, vr.UID, ev.Ref.Cluster, obj) {
		return nil
	}
	return []cache.ObjectName{key}
}

func (w *Wakes) eventMode(vr *v1alpha1.VidraResource) bool {
	return w.config().EventsOn(vr.Spec.Destination.ReconcileOnEvents)
}

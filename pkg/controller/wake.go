// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/apply"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// wake queues the owner of a managed object for a watch event of it: at
// once for a change of the object, paced for a change of its health alone
// (healthChanged).
func (c *Controller) wake(key cache.ObjectName, ev watchregistry.Event) {
	switch ev.Type {
	case watchregistry.EventInitialList:
		// A new informer's first list is no change anyone made: after a
		// restart it is part of starting up.
		c.enqueue(key, TriggerStartup)
	case watchregistry.EventDigestChanged:
		c.healthChanged(key, ev)
	default:
		c.enqueue(key, TriggerEvent)
	}
}

func (c *Controller) enqueueObject(obj any, t Trigger) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	key, err := cache.ObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.enqueue(key, t)
}

func (c *Controller) enqueue(key cache.ObjectName, t Trigger) {
	if !c.share.owns(key) {
		c.miss(key, t)
		return
	}
	c.queue.Add(key, t)
}

func (c *Controller) enqueueAfter(key cache.ObjectName, t Trigger, d time.Duration) {
	if !c.share.owns(key) {
		// Missed, it is reconciled when the share has settled: sooner
		// than asked, which a level-triggered reconcile allows.
		c.miss(key, t)
		return
	}
	c.queue.AddAfter(key, t, d)
}

// ownerOf maps a watch event of a managed object to the VidraResource named in
// its owned-by annotation, if that resource corrects drift on events.
func (c *Controller) ownerOf(ev watchregistry.Event) []cache.ObjectName {
	if ev.Object == nil {
		return nil
	}
	vr, ok := apply.MarkedOwner(c.lister, ev.Object)
	// Health changes wake the owner whether or not it corrects drift on
	// events: waiting for health never polls.
	if !ok || (!c.eventMode(vr) && ev.Type != watchregistry.EventDigestChanged) {
		return nil
	}
	key := cache.MetaObjectToName(vr)
	obj := apply.WatchedObject{GVR: ev.Ref.GVR, Namespace: ev.Object.GetNamespace(), Name: ev.Object.GetName()}
	if !c.engine.WakesFrom(key, vr.UID, ev.Ref.Cluster, obj) {
		return nil
	}
	return []cache.ObjectName{key}
}

func (c *Controller) eventMode(vr *v1alpha1.VidraResource) bool {
	if p := vr.Spec.Destination.ReconcileOnEvents; p != nil {
		return *p
	}
	return c.config().EventBased
}

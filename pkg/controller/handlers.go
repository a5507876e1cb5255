// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"

	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/apply"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	informers "github.com/vidra-operator/vidra/pkg/generated/informers/externalversions/infrahub/v1alpha1"
)

// watchResources indexes the VidraResources of vrInformer by dependency,
// trims what its cache keeps of them, and queues them as they change.
func (c *Controller) watchResources(vrInformer informers.VidraResourceInformer) error {
	if err := vrInformer.Informer().AddIndexers(cache.Indexers{dependsOnIndex: indexDependencies}); err != nil {
		return fmt.Errorf("index VidraResources by dependency: %w", err)
	}
	if err := vrInformer.Informer().SetTransform(trimCachedResource); err != nil {
		return fmt.Errorf("trim cached VidraResources: %w", err)
	}
	_, err := vrInformer.Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			c.uids.add(obj)
			t := TriggerEvent
			if isInInitialList {
				t = TriggerStartup
			}
			c.enqueueObject(obj, t)
			if vr, ok := obj.(*v1alpha1.VidraResource); ok {
				c.wakeDependents(vr)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			c.uids.update(oldObj, newObj)
			old, cur := oldObj.(*v1alpha1.VidraResource), newObj.(*v1alpha1.VidraResource)
			if t, ok := updateTrigger(old, cur); ok {
				c.enqueueObject(newObj, t)
			}
			// Its own status write is what makes a resource Ready: that
			// wakes its dependents, not itself. So does a change of why it
			// is not Ready, which their messages quote.
			if old.IsReady() != cur.IsReady() || !cur.IsReady() && old.Readiness() != cur.Readiness() {
				c.wakeDependents(cur)
			}
		},
		DeleteFunc: func(obj any) {
			c.uids.remove(obj)
			c.enqueueObject(obj, TriggerEvent)
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if vr, ok := obj.(*v1alpha1.VidraResource); ok {
				c.wakeDependents(vr)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch VidraResources: %w", err)
	}
	return nil
}

// updateTrigger decides whether an update of a VidraResource needs a
// reconcile. Status writes (Vidra's own above all) and metadata-only changes
// such as the finalizer Vidra adds do not: reacting to them would loop.
func updateTrigger(old, cur *v1alpha1.VidraResource) (Trigger, bool) {
	switch {
	case old.Annotations[v1alpha1.RequestedAtAnnotation] != cur.Annotations[v1alpha1.RequestedAtAnnotation]:
		return TriggerRequested, true
	case old.Generation != cur.Generation,
		!old.DeletionTimestamp.Equal(cur.DeletionTimestamp),
		cur.DeletionTimestamp != nil && len(old.Finalizers) != len(cur.Finalizers),
		old.UID != cur.UID:
		return TriggerEvent, true
	}
	return "", false
}

// trimCachedResource keeps VidraResources small in the informer cache, whose
// size a tenant would otherwise set: Vidra never reads their managedFields,
// and reads a manifest only through the apply engine, which reads it again
// when it needs it (apply.StripManifest). Nothing writes a cached copy back
// (see apply.StripManifest).
func trimCachedResource(obj any) (any, error) {
	if vr, ok := obj.(*v1alpha1.VidraResource); ok {
		vr.ManagedFields = nil
		apply.StripManifest(vr)
	}
	return obj, nil
}

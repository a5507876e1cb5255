// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"github.com/vidra-operator/vidra/internal/apply"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

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

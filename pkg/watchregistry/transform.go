// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// LastAppliedAnnotation is the annotation in which client-side `kubectl
// apply` keeps a full copy of the object; the transforms drop it because it
// can double an object's size in the cache and nothing reads it there.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// TransformFunc trims an object before it is cached. It receives a freshly
// decoded object that it may mutate in place (metadata-only objects arrive as
// an Unstructured of apiVersion, kind and metadata too), and must be
// idempotent: client-go may hand it the same object twice. An error fails
// the list or watch that delivered the object, which the reflector retries.
type TransformFunc func(*unstructured.Unstructured) error

// DropManagedFields is the default transform: it drops metadata.managedFields
// and the LastAppliedAnnotation, which together are often the larger part of
// a small object.
func DropManagedFields(u *unstructured.Unstructured) error {
	keepManagedFields(u, nil)
	return nil
}

// AsServed is the transform that keeps objects exactly as served.
func AsServed(*unstructured.Unstructured) error { return nil }

// KeepManagedFieldsOf returns a transform that keeps only the managedFields
// entries written by the given field managers (for example the ones kubectl
// uses, to tell a hand edit from a controller's write) and drops the
// LastAppliedAnnotation.
func KeepManagedFieldsOf(managers ...string) TransformFunc {
	keep := make(map[string]bool, len(managers))
	for _, m := range managers {
		keep[m] = true
	}
	return func(u *unstructured.Unstructured) error {
		keepManagedFields(u, keep)
		return nil
	}
}

func keepManagedFields(u *unstructured.Unstructured, keep map[string]bool) {
	md, ok := u.Object["metadata"].(map[string]any)
	if !ok {
		return
	}
	if entries, ok := md["managedFields"].([]any); ok {
		kept := entries[:0]
		for _, e := range entries {
			if m, ok := e.(map[string]any); ok {
				if name, _ := m["manager"].(string); keep[name] {
					kept = append(kept, e)
				}
			}
		}
		if len(kept) == 0 {
			delete(md, "managedFields")
		} else {
			// A fresh slice, so the dropped entries' backing array is
			// released rather than kept alive by the shorter slice.
			md["managedFields"] = append([]any(nil), kept...)
		}
	}
	if ann, ok := md["annotations"].(map[string]any); ok {
		delete(ann, LastAppliedAnnotation)
		if len(ann) == 0 {
			delete(md, "annotations")
		}
	}
}

// metadataToUnstructured turns the PartialObjectMetadata of a metadata
// informer into an Unstructured holding apiVersion, kind and metadata, so
// that callers see one object type whatever the mode. kind is "" when the
// registry was given no KindFor. Other objects pass through unchanged.
func metadataToUnstructured(obj any, gv schema.GroupVersion, kind func() string) (any, error) {
	p, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	md, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&p.ObjectMeta)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gv.String(),
		"metadata":   md,
	}}
	if k := kind(); k != "" {
		u.Object["kind"] = k
	}
	return u, nil
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
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

// transformFor returns the entry's transform: conversion of metadata-only
// objects first, so that the configured transform always sees Unstructured,
// then packing into the compact form the cache holds. Packed objects pass
// through: the watch-list path hands its objects to the transform twice.
func (r *Registry[K]) transformFor(e *entry[K]) cache.TransformFunc {
	user := r.transform
	gv := e.ref.GVR.GroupVersion()
	kind := func() string { return r.kindOf(e) }
	return func(obj any) (any, error) {
		if _, ok := obj.(*packed); ok {
			return obj, nil
		}
		if r.metadataOnly {
			var err error
			if obj, err = metadataToUnstructured(obj, gv, kind); err != nil {
				return nil, err
			}
		}
		// Keep and the owner's own write are read before the transform,
		// which may trim what they read (managedFields above all); a
		// rejected object is not transformed at all.
		if u, _ := obj.(*unstructured.Unstructured); u != nil && r.keep != nil && !r.keep(u) {
			return rejectedStub(u), nil
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u == nil {
			// Not ours to pack; the handler and reads skip it.
			return obj, nil
		}
		charge, stub, err := r.charged(e, u)
		if err != nil || stub != nil {
			return stub, err
		}
		own := r.fieldManager != "" && onlyManager(u, r.fieldManager)
		// The digest, like Keep, sees the object as served: the transform
		// may drop what it reads, and status is taken apart by pack.
		var digest uint64
		if r.wakeDigest != nil {
			digest = r.wakeDigest(u)
		}
		// The stub of an object refused for its size keeps what Charge
		// names: taken before Transform, which may drop it.
		var full *unstructured.Unstructured
		if charge.Budget != nil {
			full = stubSource(u, charge)
		}
		if err := user(u); err != nil {
			return nil, err
		}
		p, err := pack(u)
		if err != nil {
			return nil, err
		}
		if full != nil {
			if p, err = e.reserveFor(charge, full, p); err != nil || p.stub {
				return p, err
			}
		}
		// The transform runs as the reflector receives the object, which is
		// where the handler lag metric starts.
		p.received = r.clock.Since(r.epoch)
		p.ownerWrote = own
		p.digest = digest
		// One namespace string for the whole cache of a namespaced ref, not
		// one per object.
		if p.Namespace == e.ref.Namespace {
			p.Namespace = e.ref.Namespace
		}
		return p, nil
	}
}

// kindOf resolves the kind of a metadata-only entry once, from the
// reflector's goroutine, where a RESTMapper lookup may take its time.
func (r *Registry[K]) kindOf(e *entry[K]) string {
	e.kindOnce.Do(func() {
		if r.kindFor == nil {
			return
		}
		gvk, err := r.kindFor(e.ref.GVR)
		if err != nil {
			e.log.Error(err, "Cannot resolve the kind of a metadata-only resource; objects carry no kind")
			return
		}
		e.kind = gvk.Kind
	})
	return e.kind
}

package watchregistry

import (
	"k8s.io/apimachinery/pkg/api/meta"
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

// DropManagedFields is the default transform: it drops metadata.managedFields
// and the LastAppliedAnnotation, which together are often the larger part of
// a small object. It mutates the object in place, as client-go allows for
// freshly decoded objects, and is idempotent.
func DropManagedFields(obj any) (any, error) {
	return keepManagedFields(obj, nil), nil
}

// KeepManagedFieldsOf returns a transform that keeps only the managedFields
// entries written by the given field managers (for example the ones kubectl
// uses, to tell a hand edit from a controller's write) and drops the
// LastAppliedAnnotation.
func KeepManagedFieldsOf(managers ...string) cache.TransformFunc {
	keep := make(map[string]bool, len(managers))
	for _, m := range managers {
		keep[m] = true
	}
	return func(obj any) (any, error) {
		return keepManagedFields(obj, keep), nil
	}
}

func keepManagedFields(obj any, keep map[string]bool) any {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		md, ok := u.Object["metadata"].(map[string]any)
		if !ok {
			return obj
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
		return obj
	}
	// Typed objects, e.g. PartialObjectMetadata when a caller uses the
	// transform outside the registry.
	if m, err := meta.Accessor(obj); err == nil {
		var kept []metav1.ManagedFieldsEntry
		for _, e := range m.GetManagedFields() {
			if keep[e.Manager] {
				kept = append(kept, e)
			}
		}
		m.SetManagedFields(kept)
		if ann := m.GetAnnotations(); ann != nil {
			if _, ok := ann[LastAppliedAnnotation]; ok {
				delete(ann, LastAppliedAnnotation)
				if len(ann) == 0 {
					ann = nil
				}
				m.SetAnnotations(ann)
			}
		}
	}
	return obj
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

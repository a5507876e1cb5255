// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// indexers returns the caches serving a synced ref, one per label selector,
// and whether they hold all namespaces, or the typed error saying why they
// cannot be read.
func (r *Registry[K]) indexers(ref Ref) (idx []cache.Indexer, allNamespaces bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.servingLocked(ref)
	if e == nil {
		return nil, false, fmt.Errorf("%s: %w", ref, ErrNotTracked)
	}
	switch e.state {
	case StateSynced:
		return e.indexers(), e.ref.Namespace == "", nil
	case StatePending:
		if e.lastErr != nil {
			// A retry of a failed ref: still failing, as far as anyone knows.
			return nil, false, errors.Join(fmt.Errorf("%s: %w", ref, ErrNotSynced), e.lastErr)
		}
		return nil, false, fmt.Errorf("%s: %w", ref, ErrNotSynced)
	default:
		return nil, false, e.err
	}
}

// Get returns an object from the cache serving ref. It fails with an
// apierrors NotFound error when the cache does not hold it, ErrNotSynced
// before the initial list completed (it never blocks), a StateError matching
// ErrForbidden, ErrGone or ErrStopped when the informer ended, and
// ErrNotTracked for an unknown ref. namespace is "" for cluster-scoped
// objects. The object is decoded for this call: the caller's to mutate.
func (r *Registry[K]) Get(ref Ref, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := r.GetInto(ref, namespace, name, u); err != nil {
		return nil, err
	}
	return u, nil
}

// GetInto decodes an object from the cache serving ref into into, a pointer
// to a typed object (e.g. *corev1.ConfigMap) or an *unstructured.Unstructured,
// which it overwrites. A typed object is decoded straight from the cached
// JSON, once. It fails like Get, and when the object does not decode into
// into's type. With MetadataOnly, only apiVersion, kind and metadata are
// set.
func (r *Registry[K]) GetInto(ref Ref, namespace, name string, into runtime.Object) error {
	p, found, err := r.lookup(ref, namespace, name)
	if err != nil {
		return err
	}
	if !found {
		if p != nil && p.stub {
			return fmt.Errorf("get %s/%s from %s: %w: %w", namespace, name, ref, ErrStub, notFound(ref.GVR, name))
		}
		return notFound(ref.GVR, name)
	}
	if err := p.decodeInto(into); err != nil {
		return fmt.Errorf("get %s/%s from %s: %w", namespace, name, ref, err)
	}
	return nil
}

// Has reports whether the cache serving ref holds the object and its labels
// match selector (nil for any), without decoding it: a look at many objects
// (is each there, and whose is it) copies none. It fails like Get, except
// that an object the cache does not hold is false, not an error.
func (r *Registry[K]) Has(ref Ref, namespace, name string, selector labels.Selector) (bool, error) {
	p, found, err := r.lookup(ref, namespace, name)
	if err != nil || !found {
		return false, err
	}
	return selector == nil || selector.Matches(labels.Set(p.Labels)), nil
}

// GetTyped is GetInto returning a new typed object, e.g.
// GetTyped[corev1.ConfigMap](reg, ref, ns, name).
func GetTyped[T any, PT interface {
	*T
	runtime.Object
}, K comparable](r *Registry[K], ref Ref, namespace, name string) (PT, error) {
	obj := PT(new(T))
	if err := r.GetInto(ref, namespace, name, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// lookup returns the cached form of an object, without decoding it; found is
// false when the cache does not hold it, or holds only a stub (then p is
// the stub). Errors are those Get documents.
func (r *Registry[K]) lookup(ref Ref, namespace, name string) (p *packed, found bool, err error) {
	if ref.Namespace != "" && namespace != ref.Namespace {
		return nil, false, fmt.Errorf("get %s/%s: namespace outside the scope of %s", namespace, name, ref)
	}
	idxs, _, err := r.indexers(ref)
	if err != nil {
		return nil, false, fmt.Errorf("get %s/%s: %w", namespace, name, err)
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	var obj any
	ok := false
	for _, idx := range idxs {
		if obj, ok, err = idx.GetByKey(key); err != nil {
			return nil, false, fmt.Errorf("get %s/%s from %s: %w", namespace, name, ref, err)
		}
		if ok {
			break
		}
	}
	if !ok {
		return nil, false, nil
	}
	p, ok = obj.(*packed)
	if !ok {
		return nil, false, fmt.Errorf("get %s/%s from %s: the cache holds a %T", namespace, name, ref, obj)
	}
	if p.rejected {
		return nil, false, nil
	}
	return p, !p.stub, nil
}

// List returns the cached objects of the ref in namespace ("" for all the ref
// covers) that match selector (nil for all), sorted by namespace and name. It
// fails like Get. The objects are decoded for this call: the caller's to
// mutate. Only the objects that match are decoded, so a narrow selector keeps
// a List over a large cache cheap.
func (r *Registry[K]) List(ref Ref, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	return r.list(ref, namespace, selector, false)
}

// Stubs returns what the caches of ref in namespace ("" for all the ref
// covers) hold of the objects they keep only as stubs (see Charge) whose
// kept labels match selector (nil for all), sorted by namespace and name:
// each object's identity and the marks its Charge kept, nothing else. They
// exist; an owner that needs more of one reads it from the API server. It
// fails like List.
func (r *Registry[K]) Stubs(ref Ref, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	return r.list(ref, namespace, selector, true)
}

// list decodes the objects matching returns: those held in full, or with
// stubs those held as stubs.
func (r *Registry[K]) list(ref Ref, namespace string, selector labels.Selector, stubs bool) ([]*unstructured.Unstructured, error) {
	matched, err := r.matching(ref, namespace, selector, stubs)
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(matched))
	for i, p := range matched {
		if out[i], err = p.unpack(); err != nil {
			return nil, fmt.Errorf("list %s in namespace %q: %w", ref, namespace, err)
		}
	}
	return out, nil
}

// ListTyped is List decoding into typed objects, each straight from the
// cached JSON, e.g. ListTyped[corev1.ConfigMap](reg, ref, ns, nil).
func ListTyped[T any, PT interface {
	*T
	runtime.Object
}, K comparable](r *Registry[K], ref Ref, namespace string, selector labels.Selector) ([]PT, error) {
	matched, err := r.matching(ref, namespace, selector, false)
	if err != nil {
		return nil, err
	}
	out := make([]PT, len(matched))
	for i, p := range matched {
		out[i] = PT(new(T))
		if err := p.decodeInto(out[i]); err != nil {
			return nil, fmt.Errorf("list %s in namespace %q: %w", ref, namespace, err)
		}
	}
	return out, nil
}

// matching returns the cached objects List returns (with stubs, those
// Stubs returns), still packed. Labels are
// matched on the packed form, so objects the selector rejects are never
// decoded. A namespaced ref served by an all-namespaces informer reads
// through its namespace index.
func (r *Registry[K]) matching(ref Ref, namespace string, selector labels.Selector, stubs bool) ([]*packed, error) {
	if ref.Namespace != "" && namespace != "" && namespace != ref.Namespace {
		return nil, fmt.Errorf("list in namespace %s: outside the scope of %s", namespace, ref)
	}
	idxs, allNamespaces, err := r.indexers(ref)
	if err != nil {
		return nil, fmt.Errorf("list in namespace %q: %w", namespace, err)
	}
	ns := cmp.Or(namespace, ref.Namespace)
	var matched []*packed
	for _, idx := range idxs {
		var objs []any
		if ns == "" || !allNamespaces {
			objs = idx.List()
		} else if objs, err = idx.ByIndex(cache.NamespaceIndex, ns); err != nil {
			return nil, fmt.Errorf("list %s in namespace %s: %w", ref, ns, err)
		}
		matched = slices.Grow(matched, len(objs))
		for _, o := range objs {
			p, ok := o.(*packed)
			if !ok || p.rejected || p.stub != stubs {
				continue
			}
			if selector == nil || selector.Matches(labels.Set(p.Labels)) {
				matched = append(matched, p)
			}
		}
	}
	byKey := func(a, b *packed) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	}
	slices.SortFunc(matched, byKey)
	if len(idxs) > 1 {
		// Selectors that overlap cache an object twice; list it once.
		matched = slices.CompactFunc(matched, func(a, b *packed) bool { return byKey(a, b) == 0 })
	}
	return matched, nil
}

func notFound(gvr schema.GroupVersionResource, name string) error {
	return apierrors.NewNotFound(gvr.GroupResource(), name)
}

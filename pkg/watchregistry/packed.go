// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"bytes"
	"fmt"
	"reflect"
	"time"
	"unique"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
)

// packed is the form in which the informers cache an object. A decoded
// Unstructured is a tree of maps, interfaces and strings several times the
// size of its JSON, and the caches hold every managed object for as long as
// the operator runs, so they keep JSON instead and decode on read: reads are
// few (an owner's reconcile) next to the objects held.
//
// ObjectMeta holds only what the informer, its indexers and the handler's
// filters read without decoding: name and namespace (keys and the namespace
// index), UID, resourceVersion (resyncs and own writes), generation (the
// status-only filter of metadata-only objects) and labels (List's
// selector). The rest of the object is in body.
type packed struct {
	metav1.ObjectMeta

	// body is the object without status, metadata.resourceVersion,
	// metadata.managedFields and metadata.generation: exactly what the
	// status-only filter compares. encoding/json writes map keys sorted, so
	// equal content is equal bytes and the filter is a bytes.Equal.
	body []byte
	// status and managedFields are the raw JSON of .status and
	// .metadata.managedFields, nil when the object has none.
	status        []byte
	managedFields []byte
	// digest is Options.WakeDigest of the object as served, zero without
	// one and for rejected stubs.
	digest uint64
	// ownerWrote is set when the served managedFields named
	// Options.FieldManager alone.
	ownerWrote bool
	// rejected marks the stub of an object Options.Keep rejected: name,
	// namespace, UID and resourceVersion, nothing else.
	rejected bool
	// stub marks the stub of an object Options.Charge holds as such (see
	// Charge.Stub): its identity and marks only, in body.
	stub bool
	// budget is the Budget the object is charged to instead of its
	// cluster's, nil for the cluster's (Charge.Budget); reserved the bytes
	// the transform set aside on it, until the handler charges them (see
	// ledger). refusedBy is the budget that had no room for the object,
	// which is therefore a stub.
	budget    *Budget
	reserved  int64
	refusedBy *Budget
	// received is when the reflector received this version, as time since
	// the registry's epoch, for the handler lag metric.
	received time.Duration
}

var _ runtime.Object = (*packed)(nil)
var _ metav1.Object = (*packed)(nil)

// GetObjectKind implements runtime.Object. The kind is in body; nothing that
// handles a cached object (keys, indexers, the informer's bookkeeping) asks
// for it.
func (p *packed) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (p *packed) DeepCopyObject() runtime.Object {
	c := &packed{
		body:          bytes.Clone(p.body),
		status:        bytes.Clone(p.status),
		managedFields: bytes.Clone(p.managedFields),
		digest:        p.digest,
		ownerWrote:    p.ownerWrote,
		rejected:      p.rejected,
		stub:          p.stub,
		budget:        p.budget,
		refusedBy:     p.refusedBy,
		received:      p.received,
	}
	p.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return c
}

// String keeps the ObjectMeta's String, promoted from the embedded field,
// from passing for the whole object in logs.
func (p *packed) String() string {
	return fmt.Sprintf("packed %s/%s@%s (%d bytes)", p.Namespace, p.Name, p.ResourceVersion, len(p.body)+len(p.status)+len(p.managedFields))
}

// pack turns a freshly decoded (and transformed) object into its cached
// form. It takes the object apart, as transforms may.
func pack(u *unstructured.Unstructured) (*packed, error) {
	p := &packed{}
	obj := u.Object
	md, _ := obj["metadata"].(map[string]any)
	p.Name, _ = md["name"].(string)
	ns, _ := md["namespace"].(string)
	p.Namespace = intern(ns)
	uid, _ := md["uid"].(string)
	p.UID = types.UID(uid)
	if l, ok := md["labels"].(map[string]any); ok && len(l) > 0 {
		p.Labels = make(map[string]string, len(l))
		for k, v := range l {
			// Only strings are valid label values; anything else would not
			// have been selectable on the server either.
			if s, ok := v.(string); ok {
				p.Labels[intern(k)] = intern(s)
			}
		}
	}
	// resourceVersion and generation move to the typed fields only when they
	// have the types the API server gives them, so that decoding puts back
	// exactly what was there; anything odd stays in body.
	if rv, ok := md["resourceVersion"].(string); ok && rv != "" {
		p.ResourceVersion = rv
		delete(md, "resourceVersion")
	}
	if g, ok := md["generation"].(int64); ok && g != 0 {
		p.Generation = g
		delete(md, "generation")
	}
	var err error
	if mf, ok := md["managedFields"]; ok {
		if p.managedFields, err = json.Marshal(mf); err != nil {
			return nil, fmt.Errorf("encode managedFields of %s/%s: %w", p.Namespace, p.Name, err)
		}
		delete(md, "managedFields")
	}
	if st, ok := obj["status"]; ok {
		if p.status, err = json.Marshal(st); err != nil {
			return nil, fmt.Errorf("encode status of %s/%s: %w", p.Namespace, p.Name, err)
		}
		delete(obj, "status")
	}
	if p.body, err = json.Marshal(obj); err != nil {
		return nil, fmt.Errorf("encode %s/%s: %w", p.Namespace, p.Name, err)
	}
	return p, nil
}

// intern returns the one copy of s that every cached object shares. The
// namespace and the labels are what a cache holds in thousands of copies
// of a few values (an owner's label on each of its objects, a bucket label
// with 256 values, the same keys everywhere); each decoded object brings
// its own copy, which the packed object would otherwise keep. The copies
// are weak: a value no cached object uses any more is freed.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// unpack decodes the object into a fresh Unstructured, the caller's to keep
// and mutate. Numbers decode as the dynamic client decodes them (int64 when
// integral, else float64), so the result equals what was packed.
func (p *packed) unpack() (*unstructured.Unstructured, error) {
	var obj map[string]any
	if err := json.Unmarshal(p.body, &obj); err != nil {
		return nil, fmt.Errorf("decode cached %s/%s: %w", p.Namespace, p.Name, err)
	}
	if p.ResourceVersion != "" || p.Generation != 0 || p.managedFields != nil {
		// pack took these out of metadata, which therefore exists.
		md, _ := obj["metadata"].(map[string]any)
		if md == nil {
			return nil, fmt.Errorf("decode cached %s/%s: no metadata", p.Namespace, p.Name)
		}
		if p.ResourceVersion != "" {
			md["resourceVersion"] = p.ResourceVersion
		}
		if p.Generation != 0 {
			md["generation"] = p.Generation
		}
		if p.managedFields != nil {
			var mf any
			if err := json.Unmarshal(p.managedFields, &mf); err != nil {
				return nil, fmt.Errorf("decode cached managedFields of %s/%s: %w", p.Namespace, p.Name, err)
			}
			md["managedFields"] = mf
		}
	}
	if p.status != nil {
		var st any
		if err := json.Unmarshal(p.status, &st); err != nil {
			return nil, fmt.Errorf("decode cached status of %s/%s: %w", p.Namespace, p.Name, err)
		}
		obj["status"] = st
	}
	return &unstructured.Unstructured{Object: obj}, nil
}

// decodeInto decodes the object into a typed object (or an Unstructured),
// which it overwrites. Each cached part is decoded once, straight into its
// place: no intermediate Unstructured.
func (p *packed) decodeInto(into runtime.Object) error {
	if u, ok := into.(*unstructured.Unstructured); ok {
		got, err := p.unpack()
		if err != nil {
			return err
		}
		u.Object = got.Object
		return nil
	}
	v := reflect.ValueOf(into)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("decode cached %s/%s: into must be a non-nil pointer, not %T", p.Namespace, p.Name, into)
	}
	// json.Unmarshal merges into what is there: start from the zero value.
	v.Elem().SetZero()
	if err := json.Unmarshal(p.body, into); err != nil {
		return fmt.Errorf("decode cached %s/%s into %T: %w", p.Namespace, p.Name, into, err)
	}
	if p.status != nil {
		// Only the status key is present, so only the status field is set.
		doc := make([]byte, 0, len(p.status)+len(`{"status":}`))
		doc = append(append(append(doc, `{"status":`...), p.status...), '}')
		if err := json.Unmarshal(doc, into); err != nil {
			return fmt.Errorf("decode cached status of %s/%s into %T: %w", p.Namespace, p.Name, into, err)
		}
	}
	if p.ResourceVersion == "" && p.Generation == 0 && p.managedFields == nil {
		return nil
	}
	m, err := meta.Accessor(into)
	if err != nil {
		return fmt.Errorf("decode cached %s/%s into %T: %w", p.Namespace, p.Name, into, err)
	}
	m.SetResourceVersion(p.ResourceVersion)
	m.SetGeneration(p.Generation)
	if p.managedFields != nil {
		var mf []metav1.ManagedFieldsEntry
		if err := json.Unmarshal(p.managedFields, &mf); err != nil {
			return fmt.Errorf("decode cached managedFields of %s/%s: %w", p.Namespace, p.Name, err)
		}
		m.SetManagedFields(mf)
	}
	return nil
}

// onlyStatusChanged reports whether old and new differ at most in status and
// in metadata the owner does not care about: resourceVersion, managedFields
// and, when ignoreGeneration, generation. Generation is ignored for full
// objects because status writes of resources without a status subresource
// bump it while the spec stays visible in the object; for metadata-only
// objects it is the one sign of a spec change and must count.
func onlyStatusChanged(old, new *packed, ignoreGeneration bool) bool {
	return (ignoreGeneration || old.Generation == new.Generation) && bytes.Equal(old.body, new.body)
}

// onlyManager reports whether u's managedFields name manager and no other.
// It reads the map directly: converting managedFields to typed entries costs
// more than the whole check.
func onlyManager(u *unstructured.Unstructured, manager string) bool {
	md, _ := u.Object["metadata"].(map[string]any)
	entries, _ := md["managedFields"].([]any)
	if len(entries) == 0 {
		return false
	}
	for _, e := range entries {
		m, _ := e.(map[string]any)
		if name, _ := m["manager"].(string); name != manager {
			return false
		}
	}
	return true
}

// rejectedStub is the cached form of an object Options.Keep rejected: just
// enough for the informer's store to key it and follow its versions.
func rejectedStub(u *unstructured.Unstructured) *packed {
	p := &packed{rejected: true}
	p.Name, p.Namespace, p.UID, p.ResourceVersion = u.GetName(), u.GetNamespace(), u.GetUID(), u.GetResourceVersion()
	return p
}

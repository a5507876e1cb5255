// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// Interest names objects an owner wants to be woken for without owning
// them, such as the Secrets a ConfigMap names: one object by name, or the
// objects a label selector selects, within a Ref.
type Interest struct {
	// Ref is where the objects live; its informer is tracked for the owner.
	// A namespaced Ref, or Namespace below, limits the interest to one
	// namespace.
	Ref Ref
	// Namespace and Name name one object. Namespace defaults to Ref's.
	Namespace, Name string
	// Selector, when Name is empty, selects the objects of Ref by label;
	// nil or empty selects every object of Ref. It is matched against both
	// the old and the new labels of an update, so an object leaving the
	// selection wakes the owner too. A selector that is not empty gets an
	// informer of its own (Set returns Ref with it as Ref.LabelSelector),
	// shared by the interests of the same selector and Ref: it lists the
	// objects it selects whether or not the registry's selectors do.
	Selector labels.Selector
}

// Interests keeps which owners want to hear about which objects, for
// operators that react to objects they do not own, and maps events to those
// owners: put its Map in Options.Map, in front of the operator's own.
//
//	in := watchregistry.NewInterests[cache.ObjectName]()
//	reg, _ := watchregistry.New(watchregistry.Options[cache.ObjectName]{Map: in.Map(nil), ...})
//	// in the reconcile of cm, which names the Secret "db":
//	refs := in.Set(cm, []watchregistry.Interest{{Ref: secrets, Name: "db"}})
//	reg.Track(cm, refs)
//
// Set before Track: an event that arrives between them then finds the
// owner. An interest by a label selector is served by an informer of that
// selector (see Interest.Selector), so one registry serves the objects an
// operator labels, in its own scope, and those others label. An interest
// by name, or with an empty selector, sees the objects of the registry's
// scope (Options.LabelSelector and SetLabelSelectors): a registry that
// names objects it does not label runs with a selector that selects them,
// or none. Either way only what Options.Keep lets through in full wakes an
// owner; a stub (Keep, Charge) maps to no one.
type Interests[K comparable] struct {
	mu sync.RWMutex
	// byName indexes the interests in one object; bySelector the others,
	// by the cluster and resource of their Ref.
	byName     map[interestKey]map[K]struct{}
	bySelector map[resourceKey]map[K][]Interest
	owners     map[K][]Interest
}

type interestKey struct {
	res             resourceKey
	namespace, name string
}

type resourceKey struct {
	cluster string
	gvr     string
}

func resourceOf(r Ref) resourceKey { return resourceKey{r.Cluster, r.GVR.String()} }

// NewInterests returns an empty set of interests.
func NewInterests[K comparable]() *Interests[K] {
	return &Interests[K]{byName: map[interestKey]map[K]struct{}{}, bySelector: map[resourceKey]map[K][]Interest{}, owners: map[K][]Interest{}}
}

// Set replaces the owner's interests and returns the refs to Track for
// them (with the owner's other refs, if any: Track replaces the owner's
// whole set): each interest's Ref, with the interest's Selector as its
// LabelSelector when that is not empty. An empty list forgets the owner.
func (in *Interests[K]) Set(owner K, interests []Interest) []Ref {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.forgetLocked(owner)
	refs := map[Ref]struct{}{}
	for _, i := range interests {
		refs[i.watched()] = struct{}{}
		if i.Name != "" {
			k := interestKey{resourceOf(i.Ref), i.namespace(), i.Name}
			if in.byName[k] == nil {
				in.byName[k] = map[K]struct{}{}
			}
			in.byName[k][owner] = struct{}{}
			continue
		}
		res := resourceOf(i.Ref)
		if in.bySelector[res] == nil {
			in.bySelector[res] = map[K][]Interest{}
		}
		in.bySelector[res][owner] = append(in.bySelector[res][owner], i)
	}
	if len(interests) > 0 {
		in.owners[owner] = slices.Clone(interests)
	}
	return slices.SortedFunc(maps.Keys(refs), compareRefs)
}

// Forget drops the owner's interests.
func (in *Interests[K]) Forget(owner K) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.forgetLocked(owner)
}

func (in *Interests[K]) forgetLocked(owner K) {
	for _, i := range in.owners[owner] {
		if i.Name != "" {
			k := interestKey{resourceOf(i.Ref), i.namespace(), i.Name}
			delete(in.byName[k], owner)
			if len(in.byName[k]) == 0 {
				delete(in.byName, k)
			}
			continue
		}
		res := resourceOf(i.Ref)
		delete(in.bySelector[res], owner)
		if len(in.bySelector[res]) == 0 {
			delete(in.bySelector, res)
		}
	}
	delete(in.owners, owner)
}

// Owners returns the owners interested in the event's object, in no
// particular order.
func (in *Interests[K]) Owners(ev Event) []K {
	if ev.Object == nil {
		return nil
	}
	res := resourceOf(ev.Ref)
	in.mu.RLock()
	defer in.mu.RUnlock()
	out := map[K]struct{}{}
	maps.Copy(out, in.byName[interestKey{res, ev.Object.GetNamespace(), ev.Object.GetName()}])
	for owner, interests := range in.bySelector[res] {
		for _, i := range interests {
			if i.selects(ev.Object) || (ev.Old != nil && i.selects(ev.Old)) {
				out[owner] = struct{}{}
				break
			}
		}
	}
	return slices.Collect(maps.Keys(out))
}

// WantsByName reports whether owner has an interest by name in the object
// namespace/name of ref's cluster and resource: the question an owner that
// checks an event it was handed asks, without allocating.
func (in *Interests[K]) WantsByName(owner K, ref Ref, namespace, name string) bool {
	in.mu.RLock()
	defer in.mu.RUnlock()
	_, ok := in.byName[interestKey{resourceOf(ref), namespace, name}][owner]
	return ok
}

// Map returns a Map function for Options.Map: the owners interested in
// the object, and those next returns (nil for none), once each.
func (in *Interests[K]) Map(next func(Event) []K) func(Event) []K {
	return func(ev Event) []K {
		owners := in.Owners(ev)
		if next == nil {
			return owners
		}
		for _, k := range next(ev) {
			if !slices.Contains(owners, k) {
				owners = append(owners, k)
			}
		}
		return owners
	}
}

// watched is the ref whose informer serves the interest: Ref, scoped by
// the interest's own selector when it has one.
func (i Interest) watched() Ref {
	if i.Name == "" && i.Selector != nil && !i.Selector.Empty() {
		ref := i.Ref
		ref.LabelSelector = i.Selector.String()
		return ref
	}
	return i.Ref
}

func (i Interest) namespace() string {
	if i.Namespace != "" {
		return i.Namespace
	}
	return i.Ref.Namespace
}

func (i Interest) selects(u *unstructured.Unstructured) bool {
	if ns := i.namespace(); ns != "" && u.GetNamespace() != ns {
		return false
	}
	return i.Selector == nil || i.Selector.Matches(labels.Set(u.GetLabels()))
}

// String renders the interest for logs.
func (i Interest) String() string {
	if i.Name != "" {
		return fmt.Sprintf("%s/%s in %s", i.namespace(), i.Name, i.Ref)
	}
	return fmt.Sprintf("objects selected by %q in %s", i.Selector, i.Ref)
}

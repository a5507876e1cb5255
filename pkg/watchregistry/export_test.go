// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"fmt"
	"maps"
	"slices"
)

// CheckInvariants exposes the registry's bookkeeping check to the external
// tests.
func CheckInvariants[K comparable](r *Registry[K]) error { return r.checkInvariants() }

// checkInvariants verifies the bookkeeping that the concurrency tests rely
// on: every tracked ref is bound to a live (or failed, awaiting re-Track)
// entry of the registry that lists the owner, every entry's refs are bound
// to it, and no entry hands out a stopped informer.
func (r *Registry[K]) checkInvariants() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for owner, refs := range r.owners {
		if len(refs) == 0 {
			return fmt.Errorf("owner %v has an empty ref set", owner)
		}
		for ref := range refs {
			e := r.bound[ref]
			if e == nil {
				return fmt.Errorf("owner %v tracks %s but it is bound to no entry", owner, ref)
			}
			if r.entries[e.ref] != e {
				return fmt.Errorf("ref %s is bound to an entry for %s that the registry no longer holds", ref, e.ref)
			}
			if _, ok := e.refs[ref][owner]; !ok {
				return fmt.Errorf("entry %s does not list owner %v of %s", e.ref, owner, ref)
			}
		}
	}
	for ref, e := range r.bound {
		if _, ok := e.refs[ref]; !ok {
			return fmt.Errorf("ref %s is bound to entry %s, which does not serve it", ref, e.ref)
		}
		if ref != e.ref && (e.ref.Namespace != "" || ref.Cluster != e.ref.Cluster || ref.GVR != e.ref.GVR) {
			return fmt.Errorf("ref %s is bound to entry %s, which cannot serve it", ref, e.ref)
		}
	}
	for key, e := range r.entries {
		if key != e.ref {
			return fmt.Errorf("entry %s is held under %s", e.ref, key)
		}
		for ref, owners := range e.refs {
			if r.bound[ref] != e {
				return fmt.Errorf("entry %s serves %s, which is bound elsewhere", e.ref, ref)
			}
			if len(owners) == 0 {
				return fmt.Errorf("entry %s serves %s for no owner", e.ref, ref)
			}
			for owner := range owners {
				if _, ok := r.owners[owner][ref]; !ok {
					return fmt.Errorf("entry %s lists owner %v of %s, which does not track it", e.ref, owner, ref)
				}
			}
		}
		if len(e.refs) > 0 && !e.idleSince.IsZero() {
			return fmt.Errorf("entry %s has owners but is lingering", e.ref)
		}
		if e.stopped.Load() && !e.state.failed() {
			return fmt.Errorf("entry %s is in state %s but its informer was stopped", e.ref, e.state)
		}
		for _, p := range e.parts {
			if !e.state.failed() && r.runCtx != nil && !r.closed && (e.cancel == nil || p.informer.IsStopped()) {
				return fmt.Errorf("entry %s is in state %s but its informer of %q is not running", e.ref, e.state, p.selector)
			}
			if e.state.failed() {
				continue
			}
			scope := r.selectors
			if p.prepared.Load() {
				scope = r.prepared
			}
			if !slices.Contains(scope, p.selector) || p.dropped.Load() {
				return fmt.Errorf("entry %s runs an informer of %q (prepared %t, dropped %t), which is neither a selector %q nor a prepared one %q",
					e.ref, p.selector, p.prepared.Load(), p.dropped.Load(), r.selectors, r.prepared)
			}
		}
	}
	for _, sel := range r.prepared {
		if slices.Contains(r.selectors, sel) {
			return fmt.Errorf("selector %q is both in the scope and prepared", sel)
		}
	}
	return nil
}

// PreparedOwners returns the owners the prepared informer of selector for
// ref has noted to wake, once it joins the scope.
func PreparedOwners[K comparable](r *Registry[K], ref Ref, selector string) []K {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[ref]
	if e == nil {
		return nil
	}
	e.initMu.Lock()
	defer e.initMu.Unlock()
	for _, p := range e.parts {
		if p.selector == selector && p.prepared.Load() {
			return slices.Collect(maps.Keys(p.wake))
		}
	}
	return nil
}

// PreparedSynced reports whether the prepared informer of selector for ref
// has listed.
func PreparedSynced[K comparable](r *Registry[K], ref Ref, selector string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[ref]
	if e == nil {
		return false
	}
	for _, p := range e.parts {
		if p.selector == selector && p.prepared.Load() {
			return p.synced
		}
	}
	return false
}

// OnWaiting has fn run each time WaitForSync is about to wait for a change
// of ref: after it has read the ref's state. Set it before the registry
// starts.
func OnWaiting[K comparable](r *Registry[K], fn func(ref Ref)) { r.hooks.waiting = fn }

// OnSynced has fn run each time an entry has synced, between the release of
// the registry's lock and the waking of its owners. Set it before the
// registry starts.
func OnSynced[K comparable](r *Registry[K], fn func(ref Ref)) { r.hooks.synced = fn }

// OnOverBudget has fn run each time a cluster's over-budget trip is about
// to be handled. Set it before the registry starts.
func OnOverBudget[K comparable](r *Registry[K], fn func(cluster string)) { r.hooks.overBudget = fn }

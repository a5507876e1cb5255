// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// Refs returns the refs the owner tracks, sorted; nil when it tracks none.
func (r *Registry[K]) Refs(owner K) []Ref {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.owners[owner]) == 0 {
		return nil
	}
	return slices.SortedFunc(maps.Keys(r.owners[owner]), compareRefs)
}

// Owners returns the owners tracking ref, in no particular order; nil when
// none does.
func (r *Registry[K]) Owners(ref Ref) []K {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.bound[ref]
	if e == nil || len(e.refs[ref]) == 0 {
		return nil
	}
	return slices.Collect(maps.Keys(e.refs[ref]))
}

// Snapshot describes the ref: tracked, or served by a lingering informer.
// It reports false when no informer serves it.
func (r *Registry[K]) Snapshot(ref Ref) (RefSnapshot, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.servingLocked(ref)
	if e == nil {
		return RefSnapshot{}, false
	}
	return r.snapshotLocked(ref, e), true
}

// Snapshots describes every tracked ref and every lingering informer, sorted
// by ref.
func (r *Registry[K]) Snapshots() []RefSnapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]RefSnapshot, 0, len(r.bound))
	for ref, e := range r.bound {
		out = append(out, r.snapshotLocked(ref, e))
	}
	for ref, e := range r.entries {
		if len(e.refs) == 0 {
			out = append(out, r.snapshotLocked(ref, e))
		}
	}
	slices.SortFunc(out, func(a, b RefSnapshot) int { return compareRefs(a.Ref, b.Ref) })
	return out
}

func (r *Registry[K]) snapshotLocked(ref Ref, e *entry[K]) RefSnapshot {
	var heldUntil time.Time
	if h := r.holds[e.ref.Cluster]; h != nil && e.state == StateOverBudget {
		heldUntil = h.until
	}
	if e.state == StateRefused {
		heldUntil = e.refusedUntil
	}
	return RefSnapshot{
		Ref:            ref,
		ServedBy:       e.ref,
		State:          e.state,
		Objects:        int(e.objects.Load()),
		Owners:         len(e.refs[ref]),
		LingeringSince: e.idleSince,
		LastError:      e.err,
		StartedAt:      e.startedAt,
		SyncedAt:       e.syncedAt,
		NextRetry:      e.retryAt,
		HeldUntil:      heldUntil,
	}
}

// compareRefs orders refs by cluster, resource and namespace.
func compareRefs(a, b Ref) int {
	return cmp.Or(
		cmp.Compare(a.Cluster, b.Cluster),
		cmp.Compare(a.GVR.Group, b.GVR.Group),
		cmp.Compare(a.GVR.Resource, b.GVR.Resource),
		cmp.Compare(a.GVR.Version, b.GVR.Version),
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.LabelSelector, b.LabelSelector))
}

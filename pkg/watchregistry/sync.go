// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"context"
	"maps"
)

// awaitSync marks the entry synced once all its informers have listed and
// this entry's handler has seen every listed object, then enqueues, once
// each, the owners tracking the ref and the owners Map found in the lists.
// The trackers are included so that an owner whose Get returned
// ErrNotSynced is always woken, even when none of its objects exist. It runs
// once per informer, p; the last to list does the rest.
//
// A synced all-namespaces informer also takes over the namespaced refs of
// its cluster and resource from their own informers, which then stop: one
// cache instead of two. The owners of a namespaced informer that had not
// synced yet, or had failed, are woken with the others.
func (r *Registry[K]) awaitSync(ctx context.Context, e *entry[K], p *part[K]) {
	select {
	case <-ctx.Done():
		return
	case <-p.registration.HasSyncedChecker().Done():
	}
	r.mu.Lock()
	p.synced = true
	if p.prepared.Load() {
		r.mu.Unlock()
		e.log.V(1).Info("Informer of a prepared selector synced", "selector", p.selector)
		return
	}
	r.syncedLocked(e)
}

// syncedLocked marks a pending entry whose informers of the scope have all
// listed synced, and wakes its owners (see awaitSync). It unlocks
// Registry.mu.
func (r *Registry[K]) syncedLocked(e *entry[K]) {
	// A cluster whose list went over its budget is about to be stopped (see
	// Registry.overBudget): synced, its owners would be woken for nothing,
	// and told of the failure again as if it were a new one.
	if r.entries[e.ref] != e || e.state != StatePending || e.listing() || e.clients.tripping.Load() {
		r.mu.Unlock()
		return
	}
	e.state = StateSynced
	e.syncedAt = r.clock.Now()
	// A wider scope sets them again: read them here, under the lock.
	took := e.syncedAt.Sub(e.startedAt)
	e.lastFailure, e.notified, e.attempts, e.lastErr = "", nil, 0, nil
	r.budgetSyncedLocked(e)
	keys := e.ownerSet()
	if e.ref.Namespace == "" {
		r.takeOverLocked(e, keys)
	}
	// Taken while the entry is still Synced: once Registry.mu is released,
	// SetLabelSelectors may make it Pending again, and the owners its new
	// lists collect are for the sync that ends that.
	e.initMu.Lock()
	maps.Copy(keys, e.initKeys)
	e.initKeys = nil
	e.initMu.Unlock()
	r.changedLocked()
	synced := r.hooks.synced
	r.mu.Unlock()
	r.metrics.syncDuration.Observe(took.Seconds())
	if synced != nil {
		synced(e.ref)
	}

	e.log.V(1).Info("Informer synced", "objects", e.objects.Load(), "owners", len(keys), "after", took)
	ev := Event{Ref: e.ref, Type: EventInitialList}
	for k := range keys {
		if e.stopped.Load() {
			return
		}
		r.enqueue(k, ev)
		r.stats.delivered[eventTypeIndex(EventInitialList)].Add(1)
	}
}

// takeOverLocked moves the namespaced refs of wide's cluster, resource and
// label selector to wide, a synced all-namespaces informer, from their own informers, and
// stops those. The owners of the ones that were still pending, or had
// failed, are added to wake: their reads failed. Failed ones are taken over
// too, rather than left to their retry or their owners' next Track: a retry
// would start a second informer of the namespace's objects, and until
// either the ref would report a failure that a synced cache could serve.
func (r *Registry[K]) takeOverLocked(wide *entry[K], wake map[K]struct{}) {
	for ref, n := range r.entries {
		if n == wide || ref.Namespace == "" || ref.allNamespaces() != wide.ref {
			continue
		}
		if n.state != StateSynced {
			maps.Copy(wake, n.ownerSet())
		}
		for served := range n.refs {
			r.rebindLocked(served, wide)
		}
		st := n.state
		if !st.failed() {
			n.stopLocked(StateStopped, nil)
		}
		delete(r.entries, ref)
		n.log.V(1).Info("Informer stopped: the all-namespaces informer serves its ref", "previousState", st)
	}
}

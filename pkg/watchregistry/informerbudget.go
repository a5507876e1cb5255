// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// InformerBudget bounds the informers a Registry runs (Options.Informers):
// those the owners of one tenant track together, those of one cluster, and
// all of them. Zero leaves a bound off. Each informer costs memory and
// goroutines whatever it caches (some 100 KiB and ten goroutines for a
// dynamic informer of an empty resource), and an owner names resources as
// it likes: an operator whose owners are written by tenants bounds them.
//
// A Track that would go past a bound fails with an *InformerBudgetError
// and changes nothing: the owner keeps the refs it tracked, and no other
// owner notices. Before refusing for a cluster or the whole registry, Track
// stops lingering informers, the longest idle first, to make room.
//
// A tenant is charged one informer for every distinct ref its owners track,
// shared or not: an informer another tenant runs too costs each of them
// one, so that what a tenant may watch does not depend on others, and a
// tenant cannot hide its informers behind another's, which may leave at any
// time. A cluster and the registry are charged once per informer that runs,
// lingering ones included.
type InformerBudget struct {
	// PerTenant bounds the distinct refs the owners of one tenant (see
	// Options.Tenant) track together.
	PerTenant int
	// PerCluster bounds the informers of one cluster.
	PerCluster int
	// Total bounds the informers of the registry.
	Total int
}

// InformerScope names a bound of an InformerBudget.
type InformerScope string

const (
	// ScopeTenant is InformerBudget.PerTenant.
	ScopeTenant InformerScope = "tenant"
	// ScopeCluster is InformerBudget.PerCluster.
	ScopeCluster InformerScope = "cluster"
	// ScopeTotal is InformerBudget.Total.
	ScopeTotal InformerScope = "total"
)

// ErrTooManyInformers is matched (errors.Is) by the error of a Track that
// would have gone past a bound of Options.Informers; the error is an
// *InformerBudgetError.
var ErrTooManyInformers = errors.New("too many informers")

// InformerBudgetError says which bound of an InformerBudget a Track would
// have gone past.
type InformerBudgetError struct {
	// Scope is the bound.
	Scope InformerScope
	// Name is the tenant of ScopeTenant or the cluster of ScopeCluster; ""
	// for ScopeTotal (and for the local cluster).
	Name string
	// Limit is the bound, Need the informers the scope would have needed.
	Limit, Need int
}

// Error implements error.
func (e *InformerBudgetError) Error() string {
	switch e.Scope {
	case ScopeTenant:
		return fmt.Sprintf("the owners of tenant %q would track %d resources, more than the %d informers a tenant may have", e.Name, e.Need, e.Limit)
	case ScopeCluster:
		cluster := "the local cluster"
		if e.Name != "" {
			cluster = fmt.Sprintf("cluster %q", e.Name)
		}
		return fmt.Sprintf("%s would need %d informers, more than the %d it may have", cluster, e.Need, e.Limit)
	}
	return fmt.Sprintf("the registry would need %d informers, more than the %d it may have", e.Need, e.Limit)
}

// Is matches ErrTooManyInformers.
func (e *InformerBudgetError) Is(target error) bool { return target == ErrTooManyInformers }

// Informers returns the bounds of Options.Informers, for owners that check
// what they are about to need before tracking it.
// A nil Registry has none.
func (r *Registry[K]) Informers() InformerBudget {
	if r == nil {
		return InformerBudget{}
	}
	return r.informerBudget
}

// tenantFits decides a tenant's bound: the distinct refs its owners track,
// before and after a Track. A Track that does not add to a tenant past its
// bound is let through, so that an owner can always drop refs, and a bound
// lowered under what a tenant tracks does not stop its owners from
// re-tracking what they have.
func tenantFits(limit, before, after int) bool {
	return limit <= 0 || after <= limit || after <= before
}

// room decides a bound of informers that run: n more informers fit beside
// running ones (lingering ones among them) when stopping stop of the
// lingering ones makes room for them.
func room(limit, running, lingering, n int) (stop int, ok bool) {
	if limit <= 0 || n <= 0 || running+n <= limit {
		return 0, true
	}
	over := running + n - limit
	if over > lingering {
		return 0, false
	}
	return over, true
}

// chargeTenantLocked moves the owner's charge from the refs it tracked to
// want.
func (r *Registry[K]) chargeTenantLocked(owner K, old, want map[Ref]struct{}) {
	if r.tenant == nil {
		return
	}
	t := r.tenant(owner)
	refs := r.tenants[t]
	for ref := range want {
		if _, had := old[ref]; had {
			continue
		}
		if refs == nil {
			refs = map[Ref]int{}
			r.tenants[t] = refs
		}
		refs[ref]++
	}
	for ref := range old {
		if _, keep := want[ref]; keep {
			continue
		}
		if refs[ref]--; refs[ref] <= 0 {
			delete(refs, ref)
		}
	}
	if len(refs) == 0 {
		delete(r.tenants, t)
	}
}

// tenantNeedLocked returns the owner's tenant and the distinct refs its
// owners track, now and were the owner to track want.
func (r *Registry[K]) tenantNeedLocked(owner K, want map[Ref]struct{}) (tenant string, before, after int) {
	tenant = r.tenant(owner)
	refs := r.tenants[tenant]
	old := r.owners[owner]
	for ref, n := range refs {
		_, had := old[ref]
		_, keep := want[ref]
		if keep || !had || n > 1 {
			after++
		}
	}
	for ref := range want {
		if _, counted := refs[ref]; !counted {
			after++
		}
	}
	return tenant, len(refs), after
}

// startsLocked counts, by cluster, the informers a Track of want would
// start: one per ref that no live informer serves or covers, that no
// all-namespaces ref of the same Track covers, and that is not held (its
// cluster over its object budget, or its informer refused).
func (r *Registry[K]) startsLocked(want map[Ref]struct{}, now time.Time) map[string]int {
	starts := map[string]int{}
	wide := map[Ref]bool{}
	for _, ref := range slices.SortedFunc(maps.Keys(want), wideFirst) {
		if e := r.bound[ref]; e != nil && !e.state.failed() {
			continue
		}
		if r.coverLocked(ref, nil) != nil || (ref.Namespace != "" && wide[ref.allNamespaces()]) {
			continue
		}
		if _, held := r.heldLocked(ref.Cluster, now); held {
			continue
		}
		if r.refusedLocked(ref, now) != nil {
			continue
		}
		if ref.Namespace == "" {
			wide[ref] = true
		}
		starts[ref.Cluster]++
	}
	return starts
}

// informersLocked counts the informers that run (or will, once the
// registry starts) on the cluster, or on every cluster with all, and
// returns the lingering ones among them, the longest idle first.
func (r *Registry[K]) informersLocked(cluster string, all bool) (running int, lingering []*entry[K]) {
	for ref, e := range r.entries {
		if (!all && ref.Cluster != cluster) || e.state.failed() {
			continue
		}
		running++
		if len(e.refs) == 0 && !e.idleSince.IsZero() {
			lingering = append(lingering, e)
		}
	}
	slices.SortFunc(lingering, func(a, b *entry[K]) int {
		return cmp.Or(a.idleSince.Compare(b.idleSince), compareRefs(a.ref, b.ref))
	})
	return running, lingering
}

// admitLocked checks a Track of want by the owner against
// Options.Informers, and stops the lingering informers that make room for
// it. It changes nothing when it refuses.
func (r *Registry[K]) admitLocked(owner K, want map[Ref]struct{}, now time.Time) error {
	b := r.informerBudget
	if b == (InformerBudget{}) {
		return nil
	}
	if b.PerTenant > 0 && r.tenant != nil {
		if t, before, after := r.tenantNeedLocked(owner, want); !tenantFits(b.PerTenant, before, after) {
			return &InformerBudgetError{Scope: ScopeTenant, Name: t, Limit: b.PerTenant, Need: after}
		}
	}
	starts := r.startsLocked(want, now)
	// A lingering informer this Track takes up again is no room to make.
	covers := make(map[Ref]bool, len(want))
	for ref := range want {
		covers[ref.allNamespaces()] = true
	}
	reused := func(e *entry[K]) bool {
		_, own := want[e.ref]
		return own || covers[e.ref]
	}
	var evict []*entry[K]
	chosen := map[*entry[K]]bool{}
	total := 0
	for _, cluster := range slices.Sorted(maps.Keys(starts)) {
		n := starts[cluster]
		total += n
		running, lingering := r.informersLocked(cluster, false)
		lingering = slices.DeleteFunc(lingering, reused)
		stop, ok := room(b.PerCluster, running, len(lingering), n)
		if !ok {
			return &InformerBudgetError{Scope: ScopeCluster, Name: cluster, Limit: b.PerCluster, Need: running + n}
		}
		for _, e := range lingering[:stop] {
			evict, chosen[e] = append(evict, e), true
		}
	}
	running, lingering := r.informersLocked("", true)
	lingering = slices.DeleteFunc(lingering, func(e *entry[K]) bool { return chosen[e] || reused(e) })
	stop, ok := room(b.Total, running-len(evict), len(lingering), total)
	if !ok {
		return &InformerBudgetError{Scope: ScopeTotal, Limit: b.Total, Need: running - len(evict) + total}
	}
	evict = append(evict, lingering[:stop]...)
	for _, e := range evict {
		e.stopLocked(StateStopped, nil)
		delete(r.entries, e.ref)
		e.log.V(1).Info("Informer stopped before its linger ended, to make room for another", "owner", owner)
	}
	if len(evict) > 0 {
		r.changedLocked()
	}
	return nil
}

// retryRoomLocked reports whether a failed informer of the cluster may be
// started again within Options.Informers, and stops lingering informers to
// make room for it.
func (r *Registry[K]) retryRoomLocked(cluster string) bool {
	b := r.informerBudget
	if b.PerCluster <= 0 && b.Total <= 0 {
		return true
	}
	running, lingering := r.informersLocked(cluster, false)
	stop, ok := room(b.PerCluster, running, len(lingering), 1)
	if !ok {
		return false
	}
	evict := lingering[:stop]
	running, lingering = r.informersLocked("", true)
	lingering = slices.DeleteFunc(lingering, func(e *entry[K]) bool { return slices.Contains(evict, e) })
	more, ok := room(b.Total, running-len(evict), len(lingering), 1)
	if !ok {
		return false
	}
	for _, e := range append(evict, lingering[:more]...) {
		e.stopLocked(StateStopped, nil)
		delete(r.entries, e.ref)
	}
	return true
}

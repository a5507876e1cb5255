// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// Registry owns the lifecycle of dynamic (or metadata) informers for owners
// of type K, e.g. cache.ObjectName of the custom resources of an operator.
// Owners declare what they need with Track; the registry runs one informer
// per Ref (a namespaced Ref may be served by an all-namespaces informer of
// the same cluster and resource), delivers the events that matter through
// Map and Enqueue, serves reads from the caches, and stops informers nobody
// needs.
//
// All methods are safe for concurrent use. The caches hold objects in a
// compact encoded form: Get and List decode a fresh copy on every call, which
// the caller owns and may mutate, and each delivered event carries its own.
//
// Stats reports its figures; package promcollector turns them into a
// prometheus.Collector.
type Registry[K comparable] struct {
	mapFn   func(Event) []K
	enqueue func(K, Event)
	// selectors scope every informer: one informer per selector and ref;
	// prepared are the selectors of Prepare, none of them in selectors.
	// Guarded by mu.
	selectors         []string
	prepared          []string
	linger            time.Duration
	expectationTTL    time.Duration
	writeHold         time.Duration
	fieldManager      string
	transform         TransformFunc
	keep              func(*unstructured.Unstructured) bool
	charge            func(Ref, *unstructured.Unstructured) Charge
	deliverStatusOnly bool
	wakeDigest        func(*unstructured.Unstructured) uint64
	metadataOnly      bool
	kindFor           func(schema.GroupVersionResource) (schema.GroupVersionKind, error)
	isNamespaced      func(string, schema.GroupVersionResource) (bool, error)
	retryFailed       bool
	retryMaxDelay     time.Duration
	informerBudget    InformerBudget
	tenant            func(K) string
	clock             clock.WithTicker
	// epoch is the origin of packed.received, the receipt time of an event.
	epoch time.Time
	log   logr.Logger
	// logInformers says whether client-go's informer logs go to log too.
	logInformers bool

	exp     expectations
	stats   counters
	metrics metrics
	// kick wakes the loop when an informer starts lingering or a retry is
	// scheduled, so that its deadline is taken into account.
	kick chan struct{}
	// done is closed when the loop has returned and every informer exited.
	done chan struct{}

	// informers counts the goroutines of started informers, so that Run can
	// return only once every one has exited.
	informers sync.WaitGroup

	mu sync.Mutex
	// runCtx is Start's context, the parent of every informer's; nil until
	// Start. Entries tracked earlier wait for it.
	runCtx   context.Context
	closed   bool
	clusters map[string]*clusterClients
	// entries holds the informers by their own ref. An informer serves the
	// refs bound to it: its own and, for an all-namespaces informer, the
	// namespaced refs of the same cluster and resource.
	entries map[Ref]*entry[K]
	// bound maps every tracked ref to the entry serving it; all the owners of
	// a ref share its entry.
	bound  map[Ref]*entry[K]
	owners map[K]map[Ref]struct{}
	// tenants holds, by tenant (Options.Tenant), the refs its owners
	// track, each with the number of its owners that do: what
	// Options.Informers.PerTenant bounds.
	tenants map[string]map[Ref]int
	// changed is closed, and replaced, whenever an entry changes state, to
	// wake WaitForSync.
	changed chan struct{}
	// holds keeps, by cluster name, the clusters that went over their
	// Budget: no informer of theirs starts before the hold ends. Kept by
	// name, across SetCluster and RemoveCluster, so that new clients (which
	// the tenant of a remote cluster may cause) do not cut a hold short.
	holds map[string]*budgetHold

	// hooks let the package's tests act where goroutines interleave, which
	// no call of the API can order; nil otherwise. Set before Start.
	hooks struct {
		// waiting runs when WaitForSync is about to wait for a change.
		waiting func(Ref)
		// synced runs once an entry has synced and Registry.mu is
		// released, before its owners are woken.
		synced func(Ref)
		// overBudget runs when a cluster's over-budget trip is about to
		// be handled.
		overBudget func(cluster string)
	}
}

// Track replaces the whole set of refs the owner needs, atomically: informers
// for new refs are acquired (started on first interest) before the ones the
// owner no longer needs are released, so that an object moving between refs
// is never unwatched. A namespaced ref is served by the all-namespaces
// informer of its cluster and resource when one runs, rather than by an
// informer of its own. A ref that is Forbidden, Gone, Stopped or OverBudget
// gets a fresh informer, which is how an owner retries once RBAC or a CRD is
// fixed; except that a Forbidden or Gone ref stays so, with no informer
// started, until its backoff has passed (1s after the first failure,
// doubling up to Options.RetryMaxDelay: the same as Options.RetryFailed),
// and a ref of a cluster that went over its Budget stays OverBudget until the
// cluster's hold has ended.
// Track never blocks on the API server. It fails, changing nothing, for an invalid
// ref, a ref of an unknown cluster, a namespaced ref of a cluster-scoped
// resource (with Options.IsNamespaced), and after the registry has shut
// down.
func (r *Registry[K]) Track(owner K, refs []Ref) error {
	want := make(map[Ref]struct{}, len(refs))
	for _, ref := range refs {
		if err := ref.validate(); err != nil {
			return fmt.Errorf("track for owner %v: %w", owner, err)
		}
		want[ref] = struct{}{}
	}
	if err := r.checkScopes(owner, want); err != nil {
		return err
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("track for owner %v: registry has shut down: %w", owner, ErrStopped)
	}
	now := r.clock.Now()
	for ref := range want {
		if _, ok := r.clusters[ref.Cluster]; !ok {
			return fmt.Errorf("track %s for owner %v: unknown cluster %q (add it with SetCluster)", ref, owner, ref.Cluster)
		}
	}
	if err := r.admitLocked(owner, want, now); err != nil {
		return fmt.Errorf("track for owner %v: %w", owner, err)
	}
	// Resolve every ref before changing anything, so that a failing Track
	// leaves the owner's set as it was. All-namespaces refs come first, so
	// that a namespaced ref tracked with them is served by their informer.
	plan := make(map[Ref]*entry[K], len(want))
	fresh := map[Ref]*entry[K]{}
	for _, ref := range slices.SortedFunc(maps.Keys(want), wideFirst) {
		c, ok := r.clusters[ref.Cluster]
		if !ok {
			return fmt.Errorf("track %s for owner %v: unknown cluster %q (add it with SetCluster)", ref, owner, ref.Cluster)
		}
		if e := r.bound[ref]; e != nil && !e.state.failed() {
			plan[ref] = e
			continue
		}
		if e := r.coverLocked(ref, fresh); e != nil {
			plan[ref] = e
			continue
		}
		prev := r.bound[ref]
		if prev == nil {
			prev = r.entries[ref]
		}
		if prev != nil && (prev.state == StateForbidden || prev.state == StateGone) && now.Before(prev.notBefore) {
			// Within its backoff: the failure stands, and Get says so.
			plan[ref] = prev
			continue
		}
		if e := r.refusedLocked(ref, now); e != nil {
			// Its client refused it: not again before its hold ends.
			plan[ref] = e
			continue
		}
		if h, held := r.heldLocked(ref.Cluster, now); held {
			// Its cluster went over its budget: no list before the hold
			// ends, however often its owners track it.
			if prev == nil || prev.state != StateOverBudget {
				prev = r.heldEntryLocked(ref, c, prev, h)
				fresh[ref] = prev
			}
			plan[ref] = prev
			continue
		}
		e, err := r.newEntry(ref, c, prev)
		if err != nil {
			return fmt.Errorf("track %s for owner %v: %w", ref, owner, err)
		}
		fresh[ref], plan[ref] = e, e
	}
	for ref, e := range fresh {
		if old := r.entries[ref]; old != nil {
			e.log.V(1).Info("Restarting informer", "owner", owner, "previousState", old.state)
			r.replaceLocked(old, e)
		} else {
			e.log.V(1).Info("Informer requested", "owner", owner)
			r.entries[ref] = e
			if r.runCtx != nil && !e.state.failed() {
				r.startLocked(e)
			}
		}
	}
	// A ref moved to another entry may have changed state for its
	// WaitForSync without any entry changing its own: a failed entry
	// waiting for its retry, for one, left for a synced informer.
	rebound := false
	for ref, e := range plan {
		if r.bound[ref] != e {
			r.rebindLocked(ref, e)
			rebound = true
		}
		if e.refs[ref] == nil {
			e.refs[ref] = map[K]struct{}{}
		}
		e.refs[ref][owner] = struct{}{}
		e.idleSince = time.Time{}
	}
	for ref := range r.owners[owner] {
		if _, keep := want[ref]; !keep {
			r.releaseLocked(owner, ref)
		}
	}
	r.chargeTenantLocked(owner, r.owners[owner], want)
	if len(want) == 0 {
		delete(r.owners, owner)
	} else {
		r.owners[owner] = want
	}
	if len(fresh) > 0 || rebound {
		r.changedLocked()
	}
	r.log.V(2).Info("Tracking", "owner", owner, "refs", len(want), "started", len(fresh))
	return nil
}

// wideFirst orders all-namespaces refs before namespaced ones, then by
// cluster, resource and namespace, so that Track resolves deterministically.
func wideFirst(a, b Ref) int {
	switch {
	case a.Namespace == "" && b.Namespace != "":
		return -1
	case a.Namespace != "" && b.Namespace == "":
		return 1
	}
	return compareRefs(a, b)
}

// checkScopes rejects namespaced refs of cluster-scoped resources, when
// Options.IsNamespaced can tell. Refs the owner already tracks were checked
// when it first tracked them.
func (r *Registry[K]) checkScopes(owner K, want map[Ref]struct{}) error {
	if r.isNamespaced == nil {
		return nil
	}
	r.mu.Lock()
	var check []Ref
	for ref := range want {
		if _, had := r.owners[owner][ref]; !had && ref.Namespace != "" {
			check = append(check, ref)
		}
	}
	r.mu.Unlock()
	for _, ref := range check {
		namespaced, err := r.isNamespaced(ref.Cluster, ref.GVR)
		if err != nil {
			return fmt.Errorf("track %s for owner %v: scope of the resource: %w", ref, owner, err)
		}
		if !namespaced {
			return fmt.Errorf("track %s for owner %v: %w", ref, owner, ErrClusterScoped)
		}
	}
	return nil
}

// coverLocked returns the live entry that would serve ref, nil if none: its
// own informer, or the all-namespaces informer of its cluster and resource
// (preferred once synced, or when the ref has no informer of its own). fresh
// holds entries this Track is creating.
func (r *Registry[K]) coverLocked(ref Ref, fresh map[Ref]*entry[K]) *entry[K] {
	live := func(e *entry[K]) *entry[K] {
		if e != nil && e.state.failed() {
			return nil
		}
		return e
	}
	own := cmp.Or(live(r.entries[ref]), fresh[ref])
	if ref.Namespace == "" {
		return own
	}
	wide := cmp.Or(live(r.entries[ref.allNamespaces()]), fresh[ref.allNamespaces()])
	if wide != nil && (own == nil || wide.state == StateSynced) {
		return wide
	}
	return own
}

// servingLocked returns the entry that serves reads of ref: the one it is
// bound to when tracked, else a live informer covering it (one lingering, or
// tracked for other refs); nil when there is none.
func (r *Registry[K]) servingLocked(ref Ref) *entry[K] {
	if e := r.bound[ref]; e != nil {
		return e
	}
	return r.coverLocked(ref, nil)
}

// rebindLocked moves ref, with all its owners, to entry to. An entry left
// serving nothing is dropped if it had failed; live ones are handled by
// their callers.
func (r *Registry[K]) rebindLocked(ref Ref, to *entry[K]) {
	from := r.bound[ref]
	r.bound[ref] = to
	if from == nil || from == to {
		return
	}
	owners := from.refs[ref]
	delete(from.refs, ref)
	if len(owners) > 0 {
		if to.refs[ref] == nil {
			to.refs[ref] = map[K]struct{}{}
		}
		maps.Copy(to.refs[ref], owners)
		to.idleSince = time.Time{}
	}
	if len(from.refs) == 0 && from.state.failed() && r.entries[from.ref] == from {
		delete(r.entries, from.ref)
	}
}

// replaceLocked puts fresh in the place of old, a failed entry of the same
// ref, with every ref old served, and starts it when the registry runs.
func (r *Registry[K]) replaceLocked(old, fresh *entry[K]) {
	r.entries[fresh.ref] = fresh
	for ref := range old.refs {
		r.rebindLocked(ref, fresh)
	}
	if r.runCtx != nil && !fresh.state.failed() {
		r.startLocked(fresh)
	}
	r.changedLocked()
}

// Forget releases every ref of the owner, as Track(owner, nil) does.
func (r *Registry[K]) Forget(owner K) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ref := range r.owners[owner] {
		r.releaseLocked(owner, ref)
	}
	r.chargeTenantLocked(owner, r.owners[owner], nil)
	delete(r.owners, owner)
	r.log.V(2).Info("Forgotten", "owner", owner)
}

// releaseLocked drops the owner from the ref; an informer left without owners
// lingers, unless nothing runs for it anyway.
func (r *Registry[K]) releaseLocked(owner K, ref Ref) {
	e := r.bound[ref]
	if e == nil {
		return
	}
	if owners := e.refs[ref]; owners != nil {
		delete(owners, owner)
		if len(owners) == 0 {
			delete(e.refs, ref)
			delete(r.bound, ref)
		}
	}
	if !e.hasOwner(owner) {
		delete(e.notified, owner)
	}
	if len(e.refs) > 0 {
		return
	}
	if e.state.failed() || e.cancel == nil {
		// Ended, or never started because the registry has not: nothing to
		// keep warm.
		e.stopLocked(e.state, e.err)
		if r.entries[e.ref] == e {
			delete(r.entries, e.ref)
		}
		r.changedLocked()
		return
	}
	e.idleSince = r.clock.Now()
	r.wake()
}

// State returns the state of the informer serving the ref, StateNotTracked
// when there is none.
func (r *Registry[K]) State(ref Ref) State {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.servingLocked(ref); e != nil {
		return e.state
	}
	return StateNotTracked
}

// Synced reports whether the ref's cache is ready to read.
func (r *Registry[K]) Synced(ref Ref) bool { return r.State(ref) == StateSynced }

// WaitForSync blocks until the informer serving ref has synced, and returns
// nil then. It returns ErrNotTracked for a ref nobody tracks, the ref's
// StateError once its informer has ended for good, and ctx's error (joined
// with the ref's last StateError, if any) when ctx is done first. With
// Options.RetryFailed, Forbidden and Gone are not the end: it keeps waiting
// through the retries. OverBudget is, while its cluster is held: a hold
// lasts up to RetryMaxDelay, and the cluster may go over again after it.
func (r *Registry[K]) WaitForSync(ctx context.Context, ref Ref) error {
	var last error
	for {
		r.mu.Lock()
		e := r.servingLocked(ref)
		changed := r.changed
		var st State
		var stErr error
		if e != nil {
			st, stErr = e.state, e.err
		}
		retrying := e != nil && !e.retryAt.IsZero()
		if retrying && st == StateOverBudget {
			_, held := r.heldLocked(e.ref.Cluster, r.clock.Now())
			retrying = !held
		}
		r.mu.Unlock()
		switch {
		case e == nil:
			return fmt.Errorf("wait for %s: %w", ref, ErrNotTracked)
		case st == StateSynced:
			return nil
		case st.failed() && !retrying:
			return stErr
		case st.failed():
			last = stErr
		}
		if r.hooks.waiting != nil {
			r.hooks.waiting(ref)
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("wait for %s: %w; last failure: %w", ref, ctx.Err(), last)
			}
			return fmt.Errorf("wait for %s: %w", ref, ctx.Err())
		case <-changed:
		}
	}
}

// notice is an EventStateChanged to deliver: the owners of one ref.
type notice[K comparable] struct {
	ref    Ref
	owners []K
	err    error // the entry's error, for Event.Err
}

// ownersIn counts the owners notices tell, for the logs.
func ownersIn[K comparable](tell []notice[K]) int {
	n := 0
	for _, t := range tell {
		n += len(t.owners)
	}
	return n
}

// tell enqueues owners with EventStateChanged, each with the ref it tracks;
// callers must not hold r.mu.
func (r *Registry[K]) tell(notices []notice[K]) {
	for _, n := range notices {
		if len(n.owners) == 0 {
			continue
		}
		ev := Event{Ref: n.ref, Type: EventStateChanged, Err: n.err}
		r.stats.received[eventTypeIndex(EventStateChanged)].Add(1)
		for _, k := range n.owners {
			r.enqueue(k, ev)
		}
		r.stats.delivered[eventTypeIndex(EventStateChanged)].Add(uint64(len(n.owners)))
	}
}

// owned copies a set of owner keys.
func owned[K comparable](m map[K]struct{}) map[K]struct{} {
	out := make(map[K]struct{}, len(m))
	maps.Copy(out, m)
	return out
}

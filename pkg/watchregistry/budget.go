// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
)

// budgetBaseHold is how long the informers of a cluster that went over its
// Budget stay stopped the first time; the hold doubles with each
// consecutive time, up to Options.RetryMaxDelay. It is long next to a list,
// so that an owner re-tracking on every reconcile cannot make the operator
// list a hostile API server in a loop, and short enough that a cluster whose
// objects were cleaned up soon serves again.
const budgetBaseHold = 30 * time.Second

// Budget bounds the objects the informers' caches of one or more clusters
// hold together: objects of every resource, namespace and label selector,
// rejected stubs (Options.Keep) and the caches of prepared selectors
// (Registry.Prepare) included, since all of them take memory. Give one to
// the clusters whose API servers the operator does not trust with its
// memory, such as the remote clusters of one tenant, with the WithBudget
// option of SetCluster.
//
// A cluster whose informers would make the caches hold more than Max
// objects has all its informers stopped, and their caches dropped: its refs
// turn StateOverBudget (see ErrOverBudget). Other clusters sharing the
// budget keep serving. The cluster stopped is the one whose object crossed
// the limit, which need not be the one holding the most: clusters sharing
// a budget are bounded together, not shielded from each other. A Budget is
// safe for concurrent use and may be shared by several registries.
type Budget struct {
	name      string
	max       int64
	maxBytes  int64
	used      atomic.Int64
	usedBytes atomic.Int64
	// pending is what transforms set aside for objects on their way to
	// the cache (see ledger), and refused counts the objects held as stubs
	// because the budget had no room for them (Charge.Budget).
	pending atomic.Int64
	refused atomic.Int64
}

// BudgetOption configures a Budget.
type BudgetOption func(*Budget)

// BudgetName names a budget in BudgetError messages, in Stats.Budgets and
// in the metrics (label budget). Budgets without a name are not reported
// there, since nothing would tell them apart.
func BudgetName(name string) BudgetOption {
	return func(b *Budget) { b.name = name }
}

// MaxBytes bounds the bytes the cached objects take too, as the caches hold
// them (their JSON, without what Options.Transform drops, and a few hundred
// bytes of bookkeeping each): objects differ in size by four orders of
// magnitude, and an API server that is not trusted with the operator's
// memory may send few but large ones. Zero or less leaves bytes unbounded.
func MaxBytes(n int64) BudgetOption {
	return func(b *Budget) { b.maxBytes = max(n, 0) }
}

// NewBudget returns a budget of maxObjects cached objects; zero or less
// allows none.
func NewBudget(maxObjects int64, opts ...BudgetOption) *Budget {
	b := &Budget{max: max(maxObjects, 0)}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Name returns the budget's name, "" when it has none.
func (b *Budget) Name() string { return b.name }

// Max returns the most objects the caches charged to the budget may hold.
func (b *Budget) Max() int64 { return b.max }

// Used returns the objects the caches charged to the budget hold now, as
// their informers' handlers have seen them arrive and leave.
func (b *Budget) Used() int64 { return b.used.Load() }

// MaxBytes returns the most bytes the cached objects may take, zero when
// only objects are counted.
func (b *Budget) MaxBytes() int64 { return b.maxBytes }

// UsedBytes returns the bytes the cached objects charged to the budget
// take now.
func (b *Budget) UsedBytes() int64 { return b.usedBytes.Load() }

// Refused returns how many objects charged to the budget through
// Options.Charge are held as stubs now because it had no room for them.
func (b *Budget) Refused() int64 { return b.refused.Load() }

// room reports whether n more bytes fit next to what the budget holds and
// what transforms set aside for it.
func (b *Budget) room(n int64) bool {
	return b.maxBytes <= 0 || b.usedBytes.Load()+b.pending.Load()+n <= b.maxBytes
}

// over reports whether the caches hold more than the budget allows.
func (b *Budget) over() bool {
	return b.used.Load() > b.max || (b.maxBytes > 0 && b.usedBytes.Load() > b.maxBytes)
}

// BudgetUse is the use of one named Budget, in Stats.
type BudgetUse struct {
	Used, Max           int64
	UsedBytes, MaxBytes int64
}

// ClusterOption configures a cluster given to SetCluster.
type ClusterOption func(*clusterClients)

// WithBudget charges the objects cached by the cluster's informers to b.
// Without it a cluster's caches are not bounded, and its informers'
// handlers pay nothing for the accounting.
func WithBudget(b *Budget) ClusterOption {
	return func(c *clusterClients) { c.budget = b }
}

// BudgetError is the Err of the StateError of a ref whose informer was
// stopped because its cluster's caches went over their Budget. errors.Is
// matches ErrOverBudget.
type BudgetError struct {
	// Cluster is the cluster whose informers were stopped; "" is the local
	// cluster.
	Cluster string
	// Budget is the budget's name, "" when it has none.
	Budget string
	// Max and MaxBytes are the budget's.
	Max, MaxBytes int64
}

// Error implements error.
func (e *BudgetError) Error() string {
	cluster := "the local cluster"
	if e.Cluster != "" {
		cluster = "cluster " + e.Cluster
	}
	budget := "its budget"
	if e.Budget != "" {
		budget = fmt.Sprintf("its budget %q", e.Budget)
	}
	limit := objectCount(e.Max)
	if e.MaxBytes > 0 {
		limit += " or " + byteCount(e.MaxBytes)
	}
	return fmt.Sprintf("the caches of %s would hold more than %s, the most %s allows", cluster, limit, budget)
}

// Is matches ErrOverBudget.
func (e *BudgetError) Is(target error) bool { return target == ErrOverBudget }

// byteCount writes a size as people read it.
func byteCount(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func objectCount(n int64) string {
	if n == 1 {
		return "1 object"
	}
	return fmt.Sprintf("%d objects", n)
}

// account is one informer's share of the Budgets its objects are charged
// to: its cluster's, and those Options.Charge names per object. It keeps
// the key of each object its cache holds, as its handler saw them added
// and deleted, with what it was charged. Keys rather than a count, because
// the handler is told of a delete even for an object its cache never held
// (a watch event of an unknown name, which a hostile API server can send
// at will): counting it would let the cache grow past the budget unseen. A
// part of a cluster without a budget, in a registry without Charge, has no
// account, and its handler takes no lock.
//
// Stopping the informer closes the account and refunds what it held; the
// mutex orders that against a handler charging concurrently, so that a
// charge either lands before the refund (and is refunded) or is refused.
type account struct {
	// budget is the cluster's, nil when it has none.
	budget *Budget
	// ledger releases what the transform set aside for an object once it
	// is charged; nil without Charge.
	ledger *ledger
	// tripping is the cluster's clusterClients.tripping, claimed under mu
	// (see add); nil in tests of the account alone.
	tripping *atomic.Bool
	mu       sync.Mutex
	closed   bool
	keys     map[accountKey]holding
}

// holding is what one cached object is charged: size bytes and one object
// to budget (nil: nobody), and one refusal to refused when it is a stub
// for lack of room there.
type holding struct {
	size    int64
	budget  *Budget
	refused *Budget
}

func (h holding) apply(sign int64) {
	if h.budget != nil {
		h.budget.used.Add(sign)
		h.budget.usedBytes.Add(sign * h.size)
	}
	if h.refused != nil {
		h.refused.refused.Add(sign)
	}
}

type accountKey struct{ namespace, name string }

func newAccount(b *Budget, l *ledger) *account {
	if b == nil && l == nil {
		return nil
	}
	return &account{budget: b, ledger: l, keys: map[accountKey]holding{}}
}

// holdingOf is what obj is charged: to the budget Charge named for it, or
// to the cluster's.
func (a *account) holdingOf(obj any) holding {
	h := holding{size: cachedSize(obj), budget: a.budget}
	if p, ok := obj.(*packed); ok {
		if p.budget != nil {
			h.budget = p.budget
		}
		h.refused = p.refusedBy
	}
	return h
}

// add charges an object the cache now holds, or the change of size of one
// it held (an update), and reports whether the handler should go on with
// it: not once the account is closed, nor when the cluster's budget is
// over. over tells the caller to report the trip, which it alone has
// claimed (see clusterClients.tripping): false when a trip is being
// handled already. A budget of Charge never trips: the transform kept
// within it.
func (a *account) add(obj any) (handle, over bool) {
	if p, ok := obj.(*packed); ok {
		// After the charge below, so that the bytes are never unaccounted.
		defer a.ledger.settle(p)
	}
	k, ok := keyOfCached(obj)
	h := a.holdingOf(obj)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false, false
	}
	if !ok {
		return true, false
	}
	prev, had := a.keys[k]
	if had {
		prev.apply(-1)
	}
	a.keys[k] = h
	h.apply(1)
	grew := !had || prev.budget != h.budget || h.size > prev.size
	if h.budget != nil && h.budget == a.budget && grew && a.budget.over() {
		// Every charge that finds the budget exceeded counts as crossing
		// it, not only the first: that one's cluster may hold too little
		// for its refund to bring the budget back under its Max. The trip
		// is claimed here, under mu: Registry.overBudget closes the account,
		// under mu, before it resets tripping, so a charge that found the
		// budget over just before the close cannot claim the trip again
		// after the reset. It would count as a second trip, doubling the
		// hold, and stop the cluster's informers of the next start.
		return false, a.tripping == nil || a.tripping.CompareAndSwap(false, true)
	}
	return true, false
}

// remove refunds an object the cache no longer holds, if it was charged,
// and reports whether it was: a delete of an object never charged is one
// the cache never held.
func (a *account) remove(obj any) bool {
	if p, ok := obj.(*packed); ok {
		// The transform set bytes aside for the delete's object too.
		defer a.ledger.settle(p)
	}
	k, ok := keyOfCached(obj)
	if !ok {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	h, had := a.keys[k]
	if had {
		delete(a.keys, k)
		h.apply(-1)
	}
	return had
}

// close refunds everything the account holds and refuses later charges:
// the informer is stopping, and its cache is dropped with it.
func (a *account) close() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.closed = true
	for _, h := range a.keys {
		h.apply(-1)
	}
	a.keys = nil
}

// cachedSize is what an object takes in a cache: its packed JSON and
// metadata, and the bookkeeping of an object (the packed struct, the
// cache's maps and this account's entry).
func cachedSize(obj any) int64 {
	const overhead = 512
	p, ok := obj.(*packed)
	if !ok {
		return overhead
	}
	n := int64(overhead + len(p.body) + len(p.status) + len(p.managedFields) +
		len(p.Name) + len(p.Namespace) + len(p.UID) + len(p.ResourceVersion))
	for k, v := range p.Labels {
		n += int64(len(k) + len(v))
	}
	return n
}

func keyOfCached(obj any) (accountKey, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return accountKey{}, false
	}
	return accountKey{m.GetNamespace(), m.GetName()}, true
}

// budgetHold remembers that a cluster went over its budget: until until, no
// informer of the cluster starts. trips counts the consecutive times, for
// the doubling of the hold; a sync of all the cluster's informers under
// budget after the hold forgets it.
type budgetHold struct {
	trips int
	until time.Time
	err   *BudgetError
}

// budgetHoldFor returns the hold after the given number of consecutive
// over-budget failures: 30 s, doubling, capped at RetryMaxDelay.
func (r *Registry[K]) budgetHoldFor(trips int) time.Duration {
	d := budgetBaseHold
	for i := 1; i < trips && d < r.retryMaxDelay; i++ {
		d *= 2
	}
	return min(d, r.retryMaxDelay)
}

// Held reports whether the informers of cluster are held, after its caches
// went over their budget: until when, and why. It returns a zero time and
// nil otherwise. A caller that would rather not work on a cluster it cannot
// watch (its reconciles would read every object from the API server, and
// nothing would correct drift) can refuse to until then.
func (r *Registry[K]) Held(cluster string) (time.Time, *BudgetError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.heldLocked(cluster, r.clock.Now())
	if !ok {
		return time.Time{}, nil
	}
	return h.until, h.err
}

// heldLocked returns the hold of the cluster when it is still on at now.
func (r *Registry[K]) heldLocked(cluster string, now time.Time) (*budgetHold, bool) {
	h := r.holds[cluster]
	if h == nil || !now.Before(h.until) {
		return nil, false
	}
	return h, true
}

// overBudget runs, on a goroutine of its own, once a handler of the cluster
// c charged an object over the budget: it stops every live informer of the
// cluster, which refunds their caches, and puts their refs in
// StateOverBudget for a hold. The handler cannot do it itself: stopping
// takes the registry's lock, which is held while client-go's informers are
// asked about their state, and the handler must return for the informer to
// wind down.
func (r *Registry[K]) overBudget(c *clusterClients) {
	if r.hooks.overBudget != nil {
		r.hooks.overBudget(c.name)
	}
	r.mu.Lock()
	if r.closed {
		c.tripping.Store(false)
		r.mu.Unlock()
		return
	}
	now := r.clock.Now()
	h := r.holds[c.name]
	if h == nil {
		h = &budgetHold{}
		r.holds[c.name] = h
	}
	h.trips++
	trips := h.trips
	hold := r.budgetHoldFor(trips)
	h.until = now.Add(hold)
	h.err = &BudgetError{Cluster: c.name, Budget: c.budget.Name(), Max: c.budget.Max(), MaxBytes: c.budget.MaxBytes()}
	used := c.budget.Used()
	r.stats.overBudget.Add(1)
	if r.clusters[c.name] != c {
		// Replaced or removed meanwhile, which stopped its informers. The
		// hold stands all the same, as for a cluster changed after its
		// trip: clients given under its name later, which a tenant may
		// bring about, do not make it list again any sooner. That of a
		// removed cluster is forgotten when it ends (expireHolds).
		c.tripping.Store(false)
		r.wake()
		r.mu.Unlock()
		r.log.Info("The cluster's caches went over their object budget as its clients changed; it is held",
			"cluster", c.name, "budget", c.budget.Name(), "max", c.budget.Max(), "used", used,
			"hold", hold, "times", trips)
		return
	}
	var tell []notice[K]
	stopped := 0
	for ref, e := range r.entries {
		if ref.Cluster != c.name || e.state.failed() {
			// Failed ones are not retried before the hold ends (retryDue).
			continue
		}
		stopped++
		tell = append(tell, r.failOverBudgetLocked(e, h)...)
	}
	// Charges from the stopped informers are refused from now on; only
	// fresh ones, after the hold, can trip the cluster again.
	c.tripping.Store(false)
	r.changedLocked()
	r.wake()
	r.mu.Unlock()

	r.log.Info("Informers stopped: the cluster's caches went over their object budget",
		"cluster", c.name, "budget", c.budget.Name(), "max", c.budget.Max(), "used", used,
		"maxBytes", c.budget.MaxBytes(), "usedBytes", c.budget.UsedBytes(),
		"informers", stopped, "hold", hold, "times", trips, "ownersTold", ownersIn(tell))
	r.tell(tell)
}

// failOverBudgetLocked stops a live entry of a cluster over its budget and
// returns the owners to tell: all of them, at every trip. Unlike a
// Forbidden informer, which an owner re-tracking on every reconcile would
// restart at once, an over-budget one starts again only after its hold,
// so telling cannot loop; and an owner not told of a trip after the first
// would go on as if the cluster were watched (its reads going to the API
// server), with nothing to make it look again until the hold ends.
func (r *Registry[K]) failOverBudgetLocked(e *entry[K], h *budgetHold) []notice[K] {
	e.stopLocked(StateOverBudget, &StateError{Ref: e.ref, State: StateOverBudget, Err: h.err})
	tell := e.notices(nil)
	e.lastFailure, e.notified = StateOverBudget, e.ownerSet()
	switch {
	case len(e.refs) == 0:
		delete(r.entries, e.ref)
	case r.retryFailed:
		e.retryAt = h.until
	}
	return tell
}

// heldEntryLocked returns the entry of a ref of a cluster on hold: failed
// from the start, and not started, so that tracking it lists nothing. Its
// owners are not told: Track's caller reads the state. prev is the entry it
// replaces, if any.
func (r *Registry[K]) heldEntryLocked(ref Ref, c *clusterClients, prev *entry[K], h *budgetHold) *entry[K] {
	e := r.bareEntry(ref, c, prev)
	e.stopLocked(StateOverBudget, &StateError{Ref: ref, State: StateOverBudget, Err: h.err})
	if r.retryFailed {
		e.retryAt = h.until
	}
	return e
}

// budgetSyncedLocked forgets the hold of e's cluster once every informer of
// the cluster has synced under the budget after the hold: the next time it
// goes over, the hold starts from 30 s again.
func (r *Registry[K]) budgetSyncedLocked(e *entry[K]) {
	cluster := e.ref.Cluster
	h := r.holds[cluster]
	if h == nil || r.clock.Now().Before(h.until) || e.clients.tripping.Load() || r.clusters[cluster] != e.clients {
		return
	}
	for ref, o := range r.entries {
		if ref.Cluster == cluster && (o.state == StatePending || o.state == StateOverBudget) {
			return
		}
	}
	delete(r.holds, cluster)
	e.log.V(1).Info("Cluster synced under its object budget; its hold backoff starts over", "times", h.trips)
}

// expireHolds forgets the holds of clusters no longer registered once they
// have ended, and returns the next end of such a hold, zero when none. The
// holds of registered clusters are forgotten when they sync under budget;
// those of removed ones are kept until they end, so that removing and
// adding a cluster again does not cut its hold short.
func (r *Registry[K]) expireHolds(now time.Time) time.Time {
	var next time.Time
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, h := range r.holds {
		if _, ok := r.clusters[name]; ok {
			continue
		}
		if now.Before(h.until) {
			next = earliest(next, h.until)
			continue
		}
		delete(r.holds, name)
	}
	return next
}

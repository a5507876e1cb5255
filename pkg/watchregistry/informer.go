// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// entry is the cache of one Ref: one informer per label selector of the
// registry (see SetLabelSelectors), usually one. Informers are single-use,
// so an entry is never restarted: a ref that needs a new informer gets a new
// entry, and a stopped entry is removed from (or replaced in)
// Registry.entries under Registry.mu, which is what keeps a stopped informer
// from being handed out. A widened scope adds informers to a running entry.
type entry[K comparable] struct {
	ref     Ref
	log     logr.Logger
	clients *clusterClients
	// parts holds the entry's informers, one per selector, those of the
	// prepared selectors (Registry.Prepare) included. Changed under
	// Registry.mu: a widened scope appends, and a prepared informer that
	// is no longer wanted is taken out.
	parts []*part[K]
	// ctx is the context the informers run under, nil until started.
	ctx context.Context

	// stopped is set, under Registry.mu, once the informer must deliver no
	// more events; the handler reads it without the lock.
	stopped atomic.Bool
	// objects counts the objects in the cache, kept by the handler so that
	// a metrics scrape does not list every key. Without a Budget, whose
	// accounts know the keys cached, deletes of names never cached may
	// make it low, never negative (see handler.OnDelete).
	objects atomic.Int64

	// Guarded by Registry.mu.
	state State
	err   error // the StateError of a failed entry
	// refs holds the tracked refs this informer serves (its own, and for an
	// all-namespaces informer namespaced refs of its cluster and resource),
	// each with its owners. An informer without refs lingers.
	refs      map[Ref]map[K]struct{}
	idleSince time.Time          // when the last owner left; zero while owned
	cancel    context.CancelFunc // nil until started
	startedAt time.Time
	syncedAt  time.Time
	// lastFailure and notified carry over from the failed entry this one
	// replaces: owners already told that the ref is Forbidden (or Gone) are
	// not told again when the retry fails the same way, or an owner that
	// re-tracks on every reconcile would loop forever.
	lastFailure State
	notified    map[K]struct{}
	// lastErr is the error of the failed entry this one replaces, until it
	// syncs: Get of a Pending ref that failed before returns it joined with
	// ErrNotSynced, so that a caller switching on the error learns why the
	// ref is not synced rather than wait for a list that fails again.
	lastErr error
	// notBefore is when Track may replace this failed (Forbidden or Gone)
	// entry with a fresh informer: the same backoff as Options.RetryFailed,
	// so that an owner re-tracking on every reconcile neither bypasses the
	// backoff nor, woken by each failure, lists in a loop.
	notBefore time.Time
	// attempts counts the consecutive failures of the ref's informers, for
	// the backoff of Options.RetryFailed; retryAt is when a failed entry is
	// retried, zero when it is not.
	attempts int
	retryAt  time.Time
	// refusals counts the consecutive refusals of the ref's informers by
	// their client (StateRefused), for refusedUntil: when Track may start
	// a fresh one.
	refusals     int
	refusedUntil time.Time

	// The owners collected from the initial list, enqueued once synced.
	initMu   sync.Mutex
	initKeys map[K]struct{}

	kindOnce sync.Once
	kind     string

	// ledger holds what the transform set aside on the Budgets of
	// Options.Charge; nil without it.
	ledger *ledger
}

// part is one informer of an entry: the objects of one label selector.
type part[K comparable] struct {
	selector     string
	informer     cache.SharedIndexInformer
	registration cache.ResourceEventHandlerRegistration
	synced       bool               // guarded by Registry.mu
	cancel       context.CancelFunc // nil until running; guarded by Registry.mu

	// prepared is set while the part's selector is only prepared: its
	// informer lists and watches, but reads do not see its cache and its
	// events are not delivered; wake collects the owners of the objects
	// it saw meanwhile, to be woken when the selector joins the scope.
	// Both change under entry.initMu (prepared under Registry.mu too); the
	// handler reads prepared without Registry.mu.
	prepared atomic.Bool
	wake     map[K]struct{}
	// dropped is set once a prepared part is no longer wanted: its
	// informer winds down and its handler ignores what it still sees.
	dropped atomic.Bool
	// acct charges the cache's objects to the cluster's Budget; nil when
	// the cluster has none.
	acct *account
}

// indexers returns the caches of the entry's informers of the scope, not
// those of prepared selectors; called under Registry.mu.
func (e *entry[K]) indexers() []cache.Indexer {
	out := make([]cache.Indexer, 0, len(e.parts))
	for _, p := range e.parts {
		if !p.prepared.Load() {
			out = append(out, p.informer.GetIndexer())
		}
	}
	return out
}

// listing reports whether an informer of the scope has not listed yet.
func (e *entry[K]) listing() bool {
	return slices.ContainsFunc(e.parts, func(p *part[K]) bool { return !p.synced && !p.prepared.Load() })
}

// uncount takes an object out of the entry's count, which stays at zero
// rather than go below: the handler cannot always tell whether a deleted
// object was cached.
func (e *entry[K]) uncount() {
	for {
		n := e.objects.Load()
		if n <= 0 || e.objects.CompareAndSwap(n, n-1) {
			return
		}
	}
}

// hasOwner reports whether owner tracks any ref the entry serves.
func (e *entry[K]) hasOwner(owner K) bool {
	for _, owners := range e.refs {
		if _, ok := owners[owner]; ok {
			return true
		}
	}
	return false
}

// ownerSet returns the owners of every ref the entry serves.
func (e *entry[K]) ownerSet() map[K]struct{} {
	out := map[K]struct{}{}
	for _, owners := range e.refs {
		maps.Copy(out, owners)
	}
	return out
}

// notices returns the EventStateChanged to deliver to the entry's owners,
// each with the ref it tracks; skip, if not nil, leaves out owners already
// told.
func (e *entry[K]) notices(skip func(K) bool) []notice[K] {
	var out []notice[K]
	for ref, owners := range e.refs {
		n := notice[K]{ref: ref, err: e.err}
		for k := range owners {
			if skip == nil || !skip(k) {
				n.owners = append(n.owners, k)
			}
		}
		out = append(out, n)
	}
	return out
}

// bareEntry returns a Pending entry of ref without informers. prev is the
// failed entry it replaces, if any: what its owners were told carries over.
func (r *Registry[K]) bareEntry(ref Ref, c *clusterClients, prev *entry[K]) *entry[K] {
	e := &entry[K]{
		ref:     ref,
		log:     r.log.WithValues("cluster", ref.Cluster, "gvr", ref.GVR.String(), "namespace", ref.Namespace, "labelSelector", ref.LabelSelector),
		clients: c,
		state:   StatePending,
		refs:    map[Ref]map[K]struct{}{},
	}
	if r.charge != nil {
		e.ledger = newLedger()
	}
	if prev != nil && prev.state.retried() {
		e.lastFailure = prev.state
		e.notified = owned(prev.notified)
		e.attempts = prev.attempts
		e.lastErr = cmp.Or(prev.err, prev.lastErr)
	}
	if prev != nil && prev.state == StateRefused {
		e.refusals = prev.refusals
	}
	return e
}

// newEntry builds, but does not start, the informers of ref, one per label
// selector. prev is the failed entry it replaces, if any: what its owners
// were told carries over.
func (r *Registry[K]) newEntry(ref Ref, c *clusterClients, prev *entry[K]) (*entry[K], error) {
	e := r.bareEntry(ref, c, prev)
	if ref.LabelSelector != "" {
		// A scope of its own, which the registry's selectors do not change.
		p, err := r.newPart(e, ref.LabelSelector)
		if err != nil {
			return nil, err
		}
		e.parts = append(e.parts, p)
		return e, nil
	}
	for _, sel := range r.selectors {
		p, err := r.newPart(e, sel)
		if err != nil {
			return nil, err
		}
		e.parts = append(e.parts, p)
	}
	for _, sel := range r.prepared {
		p, err := r.newPart(e, sel)
		if err != nil {
			return nil, err
		}
		p.prepared.Store(true)
		e.parts = append(e.parts, p)
	}
	return e, nil
}

// newPart builds, but does not start, the informer of the entry's objects
// that selector selects.
func (r *Registry[K]) newPart(e *entry[K], selector string) (*part[K], error) {
	ref, c := e.ref, e.clients
	var tweak func(*metav1.ListOptions)
	if selector != "" {
		tweak = func(o *metav1.ListOptions) { o.LabelSelector = selector }
	}
	var indexers cache.Indexers
	if ref.Namespace == "" {
		indexers = cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	}
	p := &part[K]{selector: selector, acct: newAccount(c.budget, e.ledger)}
	if p.acct != nil {
		p.acct.tripping = &c.tripping
	}
	// Resync 0: a resync re-delivers every cached object, which is exactly
	// the storm the registry exists to avoid; the owners' own periodic
	// reconcile is the safety net.
	if r.metadataOnly {
		if c.md == nil {
			return nil, errNoClient(ref, "metadata")
		}
		p.informer = metadatainformer.NewFilteredMetadataInformer(c.md, ref.GVR, ref.Namespace, 0, indexers, tweak).Informer()
	} else {
		if c.dyn == nil {
			return nil, errNoClient(ref, "dynamic")
		}
		p.informer = dynamicinformer.NewFilteredDynamicInformer(c.dyn, ref.GVR, ref.Namespace, 0, indexers, tweak).Informer()
	}
	if err := p.informer.SetTransform(r.transformFor(e)); err != nil {
		return nil, err
	}
	if err := p.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		r.onWatchError(e, err)
	}); err != nil {
		return nil, err
	}
	hopts := cache.HandlerOptions{ResyncPeriod: ptr.To(time.Duration(0))}
	if r.logInformers {
		hopts.Logger = &e.log
	}
	reg, err := p.informer.AddEventHandlerWithOptions(&handler[K]{r: r, e: e, p: p}, hopts)
	if err != nil {
		return nil, err
	}
	p.registration = reg
	return p, nil
}

// startLocked runs the entry's informers under its own context, a child of
// Start's, so that stopping one entry is cancelling one context.
func (r *Registry[K]) startLocked(e *entry[K]) {
	ctx := r.runCtx
	if r.logInformers {
		ctx = logr.NewContext(ctx, e.log)
	}
	ctx, cancel := context.WithCancel(ctx)
	e.ctx, e.cancel = ctx, cancel
	e.startedAt = r.clock.Now()
	e.log.V(1).Info("Starting informer", "selectors", len(e.parts))
	for _, p := range e.parts {
		r.runPartLocked(e, p)
	}
}

// runPartLocked runs one informer of a started entry, under a context of
// its own, so that a prepared informer no longer wanted stops alone.
func (r *Registry[K]) runPartLocked(e *entry[K], p *part[K]) {
	r.stats.started.Add(1)
	r.stats.running.Add(1)
	ctx, cancel := context.WithCancel(e.ctx)
	p.cancel = cancel
	r.informers.Go(func() {
		p.informer.RunWithContext(ctx)
		r.stats.running.Add(-1)
	})
	r.informers.Go(func() { r.awaitSync(ctx, e, p) })
}

// stopLocked ends the entry: it delivers nothing more and its informer winds
// down asynchronously. Nobody waits for that here, so stopping is safe from
// within Map or Enqueue (Forget inside Map).
//
// The informers are dropped from the entry, which stays in the registry
// while owners track its ref, to report why it ended: their caches are
// freed once their goroutines have exited, rather than kept until the ref
// is tracked again, and what they held is refunded to the cluster's Budget
// now.
func (e *entry[K]) stopLocked(st State, err error) {
	if st.failed() && err == nil {
		err = &StateError{Ref: e.ref, State: st}
	}
	e.state = st
	e.err = err
	e.idleSince = time.Time{}
	e.retryAt = time.Time{}
	e.stopped.Store(true)
	if e.cancel != nil {
		e.cancel()
	}
	for _, p := range e.parts {
		p.acct.close()
	}
	e.ledger.close()
	e.parts = nil
}

// onWatchError runs in the reflector's goroutine each time list or watch
// fails. 403 and 404 (and 405, a resource that cannot be watched) do not heal
// by retrying soon, and a reflector retries forever, so the informer is
// stopped and its owners told; with Options.RetryFailed a fresh informer is
// scheduled after a backoff. Anything else (a restarting API server, a
// timeout) is left to the reflector's backoff.
func (r *Registry[K]) onWatchError(e *entry[K], err error) {
	var st State
	switch {
	case errors.Is(err, ErrRefused):
		// The client's own refusal: a reflector would retry it forever.
		st = StateRefused
	case apierrors.IsForbidden(err):
		st = StateForbidden
	case apierrors.IsNotFound(err), apierrors.IsMethodNotSupported(err):
		st = StateGone
	default:
		e.log.V(1).Info("List or watch failed; the informer retries with backoff", "err", err)
		return
	}

	r.mu.Lock()
	if r.entries[e.ref] != e || e.state.failed() {
		// Already stopped or replaced; its owners were told, if needed.
		r.mu.Unlock()
		return
	}
	var hold time.Duration
	if st == StateRefused {
		hold = r.refuseLocked(e, err)
	} else {
		e.stopLocked(st, &StateError{Ref: e.ref, State: st, Err: err})
	}
	// A Forbidden or Gone ref tells its owners of every failure, repeats
	// included: an owner that tracked it again read ErrNotSynced meanwhile
	// and waits to be woken. The backoff (notBefore) bounds how often that
	// happens. An over-budget or refused cluster is held, and tracking it
	// again starts nothing, so its owners are told of a failure once.
	tell := e.notices(func(k K) bool {
		_, told := e.notified[k]
		return st == e.lastFailure && told && st != StateForbidden && st != StateGone
	})
	e.lastFailure, e.notified = st, e.ownerSet()
	e.attempts++
	e.notBefore = r.clock.Now().Add(r.backoff(e.attempts))
	var retryIn time.Duration
	if len(e.refs) == 0 {
		delete(r.entries, e.ref)
	} else if r.retryFailed && !r.closed {
		retryIn = r.backoff(e.attempts)
		if st == StateRefused {
			retryIn = hold
		}
		e.retryAt = r.clock.Now().Add(retryIn)
		r.wake()
	}
	r.changedLocked()
	r.mu.Unlock()

	e.log.Info("Informer stopped", "state", st, "err", err, "ownersTold", ownersIn(tell), "retryIn", retryIn)
	r.tell(tell)
}

// errNoClient reports a cluster registered without the client the mode
// needs (SetCluster cannot fail, so Track does).
func errNoClient(ref Ref, kind string) error {
	cluster := `"" (local)`
	if ref.Cluster != "" {
		cluster = `"` + ref.Cluster + `"`
	}
	return fmt.Errorf("cluster %s was set without a %s client", cluster, kind)
}

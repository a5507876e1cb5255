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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// widenLocked adds an informer of selector's objects to a live entry. A
// synced entry is Pending again until that informer has listed: until then
// its cache lacks the objects of the wider scope, and a read would call
// them absent.
func (r *Registry[K]) widenLocked(e *entry[K], selector string) error {
	p, err := r.newPart(e, selector)
	if err != nil {
		return err
	}
	e.parts = append(e.parts, p)
	if e.state == StateSynced {
		e.state = StatePending
		e.startedAt = r.clock.Now()
	}
	if e.cancel != nil {
		r.runPartLocked(e, p)
	}
	return nil
}

// promoteLocked brings a prepared informer of the entry into the scope and
// returns the owners to wake. One that has listed joins at once, without
// making the entry Pending, and the owners of the objects it saw are woken
// as after a list (by the caller, once the entry is synced); one still
// listing makes the entry Pending until it has, as a widened scope does.
func (r *Registry[K]) promoteLocked(e *entry[K], p *part[K]) []K {
	e.initMu.Lock()
	p.prepared.Store(false)
	wake := slices.Collect(maps.Keys(p.wake))
	p.wake = nil
	if !p.synced {
		e.addInitKeysLocked(wake)
		wake = nil
	}
	e.initMu.Unlock()
	// The handler counts the objects it sees from now on; those cached
	// before count here. An event in flight across the two may be counted
	// twice: the figure is a gauge.
	e.objects.Add(int64(len(p.informer.GetStore().ListKeys())))
	if !p.synced && e.state == StateSynced {
		e.state = StatePending
		e.startedAt = r.clock.Now()
	}
	return wake
}

// addInitKeysLocked adds owners to wake when the entry syncs; called under
// initMu.
func (e *entry[K]) addInitKeysLocked(keys []K) {
	if len(keys) == 0 {
		return
	}
	if e.initKeys == nil {
		e.initKeys = make(map[K]struct{}, len(keys))
	}
	for _, k := range keys {
		e.initKeys[k] = struct{}{}
	}
}

// prepareLocked makes the entry's prepared informers those of selectors:
// it stops the ones no longer wanted and starts the missing ones.
func (r *Registry[K]) prepareLocked(e *entry[K], selectors []string) error {
	e.parts = slices.DeleteFunc(e.parts, func(p *part[K]) bool {
		if !p.prepared.Load() || slices.Contains(selectors, p.selector) {
			return false
		}
		p.dropped.Store(true)
		if p.cancel != nil {
			p.cancel()
		}
		p.acct.close()
		return true
	})
	for _, sel := range selectors {
		if slices.ContainsFunc(e.parts, func(p *part[K]) bool { return p.selector == sel }) {
			continue
		}
		p, err := r.newPart(e, sel)
		if err != nil {
			return err
		}
		p.prepared.Store(true)
		e.parts = append(e.parts, p)
		if e.cancel != nil {
			r.runPartLocked(e, p)
		}
	}
	return nil
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

// transformFor returns the entry's transform: conversion of metadata-only
// objects first, so that the configured transform always sees Unstructured,
// then packing into the compact form the cache holds. Packed objects pass
// through: the watch-list path hands its objects to the transform twice.
func (r *Registry[K]) transformFor(e *entry[K]) cache.TransformFunc {
	user := r.transform
	gv := e.ref.GVR.GroupVersion()
	kind := func() string { return r.kindOf(e) }
	return func(obj any) (any, error) {
		if _, ok := obj.(*packed); ok {
			return obj, nil
		}
		if r.metadataOnly {
			var err error
			if obj, err = metadataToUnstructured(obj, gv, kind); err != nil {
				return nil, err
			}
		}
		// Keep and the owner's own write are read before the transform,
		// which may trim what they read (managedFields above all); a
		// rejected object is not transformed at all.
		if u, _ := obj.(*unstructured.Unstructured); u != nil && r.keep != nil && !r.keep(u) {
			return rejectedStub(u), nil
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u == nil {
			// Not ours to pack; the handler and reads skip it.
			return obj, nil
		}
		charge, stub, err := r.charged(e, u)
		if err != nil || stub != nil {
			return stub, err
		}
		own := r.fieldManager != "" && onlyManager(u, r.fieldManager)
		// The digest, like Keep, sees the object as served: the transform
		// may drop what it reads, and status is taken apart by pack.
		var digest uint64
		if r.wakeDigest != nil {
			digest = r.wakeDigest(u)
		}
		// The stub of an object refused for its size keeps what Charge
		// names: taken before Transform, which may drop it.
		var full *unstructured.Unstructured
		if charge.Budget != nil {
			full = stubSource(u, charge)
		}
		if err := user(u); err != nil {
			return nil, err
		}
		p, err := pack(u)
		if err != nil {
			return nil, err
		}
		if full != nil {
			if p, err = e.reserveFor(charge, full, p); err != nil || p.stub {
				return p, err
			}
		}
		// The transform runs as the reflector receives the object, which is
		// where the handler lag metric starts.
		p.received = r.clock.Since(r.epoch)
		p.ownerWrote = own
		p.digest = digest
		// One namespace string for the whole cache of a namespaced ref, not
		// one per object.
		if p.Namespace == e.ref.Namespace {
			p.Namespace = e.ref.Namespace
		}
		return p, nil
	}
}

// kindOf resolves the kind of a metadata-only entry once, from the
// reflector's goroutine, where a RESTMapper lookup may take its time.
func (r *Registry[K]) kindOf(e *entry[K]) string {
	e.kindOnce.Do(func() {
		if r.kindFor == nil {
			return
		}
		gvk, err := r.kindFor(e.ref.GVR)
		if err != nil {
			e.log.Error(err, "Cannot resolve the kind of a metadata-only resource; objects carry no kind")
			return
		}
		e.kind = gvk.Kind
	})
	return e.kind
}

// handler receives the informer's notifications, one at a time per entry,
// and filters them; it holds no registry lock while calling Map or Enqueue.
type handler[K comparable] struct {
	r *Registry[K]
	e *entry[K]
	p *part[K]
}

// aside reports whether the part's event is not for delivery: one of a
// prepared selector, whose owners it notes to wake once the selector joins
// the scope, or one of a prepared informer no longer wanted.
func (h *handler[K]) aside(obj any) bool {
	p := h.p
	if p.dropped.Load() {
		return true
	}
	if !p.prepared.Load() {
		return false
	}
	var keys []K
	if pk, ok := obj.(*packed); ok && !pk.rejected {
		if u, ok := h.e.unpack(pk); ok {
			// Map is the owners' code, which may call the registry: never
			// under initMu.
			keys = h.r.mapFn(Event{Ref: h.e.ref, Type: EventInitialList, Object: u})
		}
	}
	e := h.e
	e.initMu.Lock()
	defer e.initMu.Unlock()
	if !p.prepared.Load() {
		// Joined the scope meanwhile: delivered as any other event.
		return false
	}
	if len(keys) > 0 && p.wake == nil {
		p.wake = map[K]struct{}{}
	}
	for _, k := range keys {
		p.wake[k] = struct{}{}
	}
	return true
}

func (h *handler[K]) OnAdd(obj any, isInInitialList bool) {
	// Charged first, whatever the object: a rejected stub or the object of
	// a prepared selector takes memory too. A cluster without a budget pays
	// one nil check.
	if a := h.p.acct; a != nil {
		if handle, over := a.add(obj); !handle {
			if over {
				h.overBudget()
			}
			return
		}
	}
	p, ok := obj.(*packed)
	if !ok || h.aside(obj) {
		return
	}
	r, e := h.r, h.e
	e.objects.Add(1)
	if p.rejected {
		r.stats.filtered[filterIndex(FilterRejected)].Add(1)
		return
	}
	if isInInitialList {
		r.stats.received[eventTypeIndex(EventInitialList)].Add(1)
		e.collectInitial(r, p)
		return
	}
	r.stats.received[eventTypeIndex(EventAdded)].Add(1)
	h.added(p)
}

// overBudget has the cluster's informers stopped, from a goroutine of its
// own (see Registry.overBudget); account.add claimed the trip, so no other
// goroutine is doing it already.
func (h *handler[K]) overBudget() {
	c := h.e.clients
	// The informer this handler belongs to runs under r.informers, so the
	// group's count is not zero here and Run waits for this goroutine too.
	h.r.informers.Go(func() { h.r.overBudget(c) })
}

// added handles an add, now or once the write in flight that held it has
// ended.
func (h *handler[K]) added(p *packed) {
	r, e := h.r, h.e
	k := keyOf(e.ref, p.Namespace, p.Name)
	if r.hold(k, func() { h.added(p) }) {
		return
	}
	// An object only the owners' manager wrote is their own creation,
	// whether or not its ExpectWrite came before the event.
	if r.exp.matchWrite(k, p.ResourceVersion, r.clock.Now()) || p.ownerWrote {
		r.stats.filtered[filterIndex(FilterOwnWrite)].Add(1)
		return
	}
	u, ok := e.unpack(p)
	if !ok {
		return
	}
	r.deliver(e, Event{Ref: e.ref, Type: EventAdded, Object: u}, p.received)
}

// hold keeps an event of an object a write of which is in flight for when
// the write ends (see BeginWrite), and reports whether it did.
func (r *Registry[K]) hold(k objectKey, resume func()) bool {
	if !r.exp.hold(k, resume) {
		return false
	}
	r.stats.held.Add(1)
	// The loop releases the event should the write outlast its hold.
	r.wake()
	return true
}

// collectInitial maps an object of the initial list to its owners instead of
// delivering it, so that a list of thousands of objects wakes each owner
// once.
func (e *entry[K]) collectInitial(r *Registry[K], p *packed) {
	// The owner may have written the object just before the informer
	// started; the coalesced event covers that write.
	r.exp.matchWrite(keyOf(e.ref, p.Namespace, p.Name), p.ResourceVersion, r.clock.Now())
	u, ok := e.unpack(p)
	if !ok {
		return
	}
	keys := r.mapFn(Event{Ref: e.ref, Type: EventInitialList, Object: u})
	if len(keys) == 0 {
		return
	}
	e.initMu.Lock()
	defer e.initMu.Unlock()
	e.addInitKeysLocked(keys)
}

func (h *handler[K]) OnUpdate(oldObj, newObj any) {
	// An update may grow an object: its new size is charged.
	if a := h.p.acct; a != nil {
		if handle, over := a.add(newObj); !handle {
			if over {
				h.overBudget()
			}
			return
		}
	}
	o, ok1 := oldObj.(*packed)
	n, ok2 := newObj.(*packed)
	if !ok1 || !ok2 || h.aside(newObj) {
		return
	}
	r := h.r
	r.stats.received[eventTypeIndex(EventUpdated)].Add(1)
	if o.ResourceVersion == n.ResourceVersion {
		r.stats.filtered[filterIndex(FilterResync)].Add(1)
		return
	}
	if o.rejected && n.rejected {
		r.stats.filtered[filterIndex(FilterRejected)].Add(1)
		return
	}
	h.updated(o, n)
}

// updated handles an update, now or once the write in flight that held it
// has ended.
func (h *handler[K]) updated(o, n *packed) {
	r, e := h.r, h.e
	k := keyOf(e.ref, n.Namespace, n.Name)
	if r.hold(k, func() { h.updated(o, n) }) {
		return
	}
	switch {
	case n.rejected:
		// Out of the owners' sight from now on, as if deleted: its owner
		// may want it back.
		if u, ok := e.unpack(o); ok {
			r.deliver(e, Event{Ref: e.ref, Type: EventDeleted, Object: u}, n.received)
		}
		return
	case o.rejected:
		if r.exp.matchWrite(k, n.ResourceVersion, r.clock.Now()) {
			r.stats.filtered[filterIndex(FilterOwnWrite)].Add(1)
			return
		}
		if u, ok := e.unpack(n); ok {
			r.deliver(e, Event{Ref: e.ref, Type: EventAdded, Object: u}, n.received)
		}
		return
	}
	// Own writes first, so that an expectation is consumed even when the
	// write also looks status-only.
	if r.exp.matchWrite(k, n.ResourceVersion, r.clock.Now()) {
		r.stats.filtered[filterIndex(FilterOwnWrite)].Add(1)
		return
	}
	typ := EventUpdated
	if !r.deliverStatusOnly && r.statusOnly(o, n) {
		// Status churn wakes nobody, unless it moves the condition the
		// owners wait on.
		if r.wakeDigest == nil || o.digest == n.digest {
			r.stats.filtered[filterIndex(FilterStatusOnly)].Add(1)
			return
		}
		typ = EventDigestChanged
	}
	nu, ok1 := e.unpack(n)
	ou, ok2 := e.unpack(o)
	if !ok1 || !ok2 {
		return
	}
	r.deliver(e, Event{Ref: e.ref, Type: typ, Object: nu, Old: ou}, n.received)
}

// statusOnly applies the status-only filter. A metadata-only object without
// a generation (ConfigMap, Secret) changed something we cannot see, so its
// update is never called status-only.
func (r *Registry[K]) statusOnly(o, n *packed) bool {
	// A stub shows nothing of what changed.
	if o.stub || n.stub {
		return false
	}
	if r.metadataOnly && n.Generation == 0 {
		return false
	}
	return onlyStatusChanged(o, n, !r.metadataOnly)
}

func (h *handler[K]) OnDelete(obj any) {
	// A tombstone's object is the cached one, received long ago: no lag to
	// measure.
	tombstone := false
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, tombstone = t.Obj, true
	}
	// client-go hands over the deletes of names its cache never held (a
	// watch event of an unknown name, which a hostile API server can send
	// at will): they must not take the count down. The account knows what
	// was cached; without one, the count at least never goes below zero.
	held := true
	if a := h.p.acct; a != nil {
		held = a.remove(obj)
	}
	p, ok := obj.(*packed)
	if !ok || h.aside(obj) {
		return
	}
	r, e := h.r, h.e
	if held {
		e.uncount()
	}
	r.stats.received[eventTypeIndex(EventDeleted)].Add(1)
	if p.rejected {
		r.stats.filtered[filterIndex(FilterRejected)].Add(1)
		return
	}
	h.deleted(p, tombstone)
}

// deleted handles a delete, now or once the write in flight that held it
// has ended.
func (h *handler[K]) deleted(p *packed, tombstone bool) {
	r, e := h.r, h.e
	k := keyOf(e.ref, p.Namespace, p.Name)
	if r.hold(k, func() { h.deleted(p, tombstone) }) {
		return
	}
	now := r.clock.Now()
	// A write that takes the object out of the label selector reaches the
	// watch as a delete at the write's version; a tombstone carries the
	// cached version instead, which an own write may have produced before
	// the object's real, unseen delete.
	if r.exp.matchDelete(k, p.UID, now) || (!tombstone && r.exp.matchWrite(k, p.ResourceVersion, now)) {
		r.stats.filtered[filterIndex(FilterOwnWrite)].Add(1)
		return
	}
	u, ok := e.unpack(p)
	if !ok {
		return
	}
	received := p.received
	if tombstone {
		received = 0
	}
	r.deliver(e, Event{Ref: e.ref, Type: EventDeleted, Object: u}, received)
}

// unpack decodes a cached object for an event. It cannot fail on what pack
// wrote; should it, the event is logged and dropped rather than delivered
// without its object, and the owner's periodic reconcile catches up.
func (e *entry[K]) unpack(p *packed) (*unstructured.Unstructured, bool) {
	u, err := p.unpack()
	if err != nil {
		e.log.Error(err, "Cannot decode a cached object; event dropped")
		return nil, false
	}
	return u, true
}

// deliver maps the event to its owners and enqueues them. received is when
// the reflector received the event (see packed.received), zero when unknown.
func (r *Registry[K]) deliver(e *entry[K], ev Event, received time.Duration) {
	if e.stopped.Load() {
		return
	}
	keys := r.mapFn(ev)
	if len(keys) == 0 {
		r.stats.filtered[filterIndex(FilterUnmapped)].Add(1)
		return
	}
	if received > 0 {
		r.metrics.handlerLag.Observe((r.clock.Since(r.epoch) - received).Seconds())
	}
	for _, k := range keys {
		r.enqueue(k, ev)
	}
	r.stats.delivered[eventTypeIndex(ev.Type)].Add(uint64(len(keys)))
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

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/clock"
)

// DefaultLinger is how long an informer no owner needs keeps running when
// Options.Linger is zero: long enough that an owner re-tracking it soon (a
// resource re-applied, an operator restarting a reconcile) reuses its cache.
const DefaultLinger = 2 * time.Minute

const (
	defaultExpectationTTL = time.Minute
	defaultWriteHold      = 10 * time.Second
	defaultRetryMaxDelay  = 5 * time.Minute
	// retryBaseDelay is the first retry delay of a failed informer with
	// Options.RetryFailed; it doubles with each failure of the same ref.
	retryBaseDelay = time.Second
)

// Options configure a Registry. Map and Enqueue are required; the zero value
// of every other field is a sensible default.
type Options[K comparable] struct {
	// LabelSelector scopes every informer, e.g.
	// "app.kubernetes.io/managed-by=vidra": only matching objects are listed,
	// watched and cached.
	LabelSelector string
	// Linger is how long an informer that no owner needs any more keeps
	// running before it stops, so that an owner that drops a ref and takes it
	// back soon (a manifest edited twice) does not pay for a new list. Zero or
	// less means two minutes.
	Linger time.Duration
	// ExpectationTTL bounds how long ExpectWrite, Write.Done and
	// ExpectDelete are remembered when their event never comes. Zero or less
	// means one minute.
	ExpectationTTL time.Duration
	// WriteHold bounds how long the events of an object are held back while
	// a write of it declared with BeginWrite is in flight: a write whose
	// answer takes longer (or never comes, its Write never ended) lets them
	// through then, at the cost of waking its owner once for nothing. Set it
	// at least to the clients' request timeout. Zero or less means ten
	// seconds.
	WriteHold time.Duration
	// FieldManager is the field manager of the owners' own writes, if they
	// all use one. An added object whose managedFields, as served, name this
	// manager alone was created by an owner's write, and its event is
	// filtered as an own write even when it was not declared with
	// BeginWrite and ExpectWrite has not been called yet: the watch often
	// delivers a creation before the write's answer reaches the writer, and
	// waking the owner for its own creation costs a reconcile per object.
	FieldManager string
	// Map returns the owners to enqueue for an event; it may return keys of
	// owners that do not track the ref. It is called without any registry
	// lock held, from the informer's delivery goroutine, so it may call Track
	// or Forget, and should be quick.
	Map func(Event) []K
	// Enqueue hands an owner key to the caller, typically to a workqueue's
	// Add. It is called without any registry lock held and should not block.
	Enqueue func(key K, ev Event)
	// Transform runs on every object before it is cached. Nil means
	// DropManagedFields; AsServed keeps objects exactly as served.
	Transform TransformFunc
	// Keep, if set, decides which objects the caches hold. An object it
	// rejects (one that matches the label selector but that no owner can
	// own, such as an object someone else labelled) is held only as a stub
	// of its name, namespace and resourceVersion: Get and List do not see
	// it, Map is not called for it, and its events are counted as
	// FilterRejected. An object that becomes rejected is delivered as
	// EventDeleted, one that stops being rejected as EventAdded. Keep runs
	// on the informer's goroutine, before Transform, and should be quick.
	Keep func(*unstructured.Unstructured) bool
	// Charge, if set, decides for each object Keep keeps whether the caches
	// hold it in full or as a stub, and to which Budget its bytes are
	// charged (see Charge and ErrStub). It runs on the informer's
	// goroutine, on the object as served, after Keep and before
	// Transform, and should be quick.
	Charge func(Ref, *unstructured.Unstructured) Charge
	// DeliverStatusOnly delivers updates that change only status and
	// bookkeeping metadata; by default they are filtered.
	DeliverStatusOnly bool
	// WakeDigest, if set, lets through the status-only updates that matter
	// to the owners: it digests the condition they wait on (a hash of an
	// object's computed health, say), and a status-only update whose new
	// version digests differently from the previous one is delivered as
	// EventDigestChanged; the others are filtered as FilterStatusOnly. It
	// runs once per object version received (initial lists and relists
	// included), on the informer's goroutine, on the object as served:
	// after Keep (rejected objects are not digested) and before Transform,
	// so it sees status and whatever Transform drops. Only the number is
	// kept, with the cached object, so comparing costs nothing later. It
	// must be quick, deterministic (a map iterated in random order makes
	// every version look changed) and must not keep the object, which
	// Transform then mutates. It cannot be combined with MetadataOnly,
	// whose objects have no status, nor with DeliverStatusOnly, which
	// already delivers every status-only update.
	WakeDigest func(*unstructured.Unstructured) uint64
	// MetadataOnly uses metadata informers: the cache holds only apiVersion,
	// kind and metadata of each object, which is much smaller, and reads
	// return such partial objects. Spec and data changes of objects without
	// metadata.generation (ConfigMaps, Secrets) are then seen only as a new
	// resourceVersion and always delivered.
	MetadataOnly bool
	// KindFor names the kind of a resource for MetadataOnly objects, whose
	// API responses do not carry it; a RESTMapper's KindFor fits. Nil leaves
	// kind unset on metadata-only objects.
	KindFor func(schema.GroupVersionResource) (schema.GroupVersionKind, error)
	// IsNamespaced, if set, lets Track reject a ref with a namespace on a
	// cluster-scoped resource, which the API server would otherwise answer
	// with a 404 that reads as StateGone. A RESTMapper fits:
	// meta.RESTMapper.KindFor then RESTMapping's Scope, per cluster. It is
	// called from Track, without any registry lock held, for the namespaced
	// refs an owner did not track before, and should be quick (cached).
	IsNamespaced func(cluster string, gvr schema.GroupVersionResource) (bool, error)
	// RetryFailed makes an informer that was refused (StateForbidden) or
	// whose resource is not served (StateGone) retry by itself, with an
	// exponential backoff from one second up to RetryMaxDelay, for as long as
	// an owner tracks its ref. The ref reports the failure in between, and
	// owners are told of it once. The informers of a cluster stopped over
	// its Budget (StateOverBudget) are retried too, once the cluster's hold
	// has passed. Without it, a failed informer waits for its owners to
	// Track the ref again.
	RetryFailed bool
	// RetryMaxDelay caps the backoff of RetryFailed and the hold of a
	// cluster over its Budget; zero or less means five minutes.
	RetryMaxDelay time.Duration
	// Clock drives linger, retries, budget holds and expectation expiry;
	// nil means the real clock.
	Clock clock.WithTicker
	// Logger receives the registry's logs and, through the informers'
	// contexts, client-go's, with the keys cluster, gvr, namespace and owner.
	// The zero value discards the registry's logs and leaves client-go's to
	// the logger of Run's context (klog's by default).
	Logger logr.Logger
	// Informers bounds the informers the registry runs, per tenant, per
	// cluster and in all (see InformerBudget); the zero value bounds
	// nothing.
	Informers InformerBudget
	// Tenant names the tenant an owner is charged to for
	// Informers.PerTenant, such as the namespace of a namespaced custom
	// resource. Nil leaves PerTenant off. It is called under the
	// registry's lock and must be quick and must not call the registry.
	Tenant func(K) string
}

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

type clusterClients struct {
	name string
	dyn  dynamic.Interface
	md   metadata.Interface
	// budget, if not nil, is charged with the objects cached by the
	// cluster's informers.
	budget *Budget
	// tripping is claimed by the first charge of an object over the budget
	// (account.add, under the account's lock), so that one goroutine stops
	// the cluster's informers however many objects arrive meanwhile, and
	// reset once they are stopped.
	tripping atomic.Bool
}

// New returns a registry; call Start or Run to start it and SetCluster (with
// "" for the local cluster) to give it clients. Refs may be tracked before
// it starts: their informers start when it does.
func New[K comparable](opts Options[K]) (*Registry[K], error) {
	if opts.Map == nil || opts.Enqueue == nil {
		return nil, errors.New("watchregistry: Options.Map and Options.Enqueue are required")
	}
	if _, err := labels.Parse(opts.LabelSelector); err != nil {
		return nil, fmt.Errorf("watchregistry: label selector %q: %w", opts.LabelSelector, err)
	}
	if opts.WakeDigest != nil && opts.MetadataOnly {
		return nil, errors.New("watchregistry: Options.WakeDigest needs the objects' status, which MetadataOnly informers do not receive")
	}
	if opts.WakeDigest != nil && opts.DeliverStatusOnly {
		return nil, errors.New("watchregistry: Options.WakeDigest and DeliverStatusOnly exclude each other: the latter delivers every status-only update")
	}
	r := &Registry[K]{
		mapFn:             opts.Map,
		enqueue:           opts.Enqueue,
		selectors:         []string{opts.LabelSelector},
		linger:            opts.Linger,
		expectationTTL:    opts.ExpectationTTL,
		writeHold:         opts.WriteHold,
		fieldManager:      opts.FieldManager,
		transform:         opts.Transform,
		keep:              opts.Keep,
		charge:            opts.Charge,
		deliverStatusOnly: opts.DeliverStatusOnly,
		wakeDigest:        opts.WakeDigest,
		metadataOnly:      opts.MetadataOnly,
		kindFor:           opts.KindFor,
		isNamespaced:      opts.IsNamespaced,
		retryFailed:       opts.RetryFailed,
		retryMaxDelay:     opts.RetryMaxDelay,
		informerBudget:    opts.Informers,
		tenant:            opts.Tenant,
		clock:             opts.Clock,
		log:               opts.Logger,
		kick:              make(chan struct{}, 1),
		done:              make(chan struct{}),
		clusters:          map[string]*clusterClients{},
		entries:           map[Ref]*entry[K]{},
		bound:             map[Ref]*entry[K]{},
		owners:            map[K]map[Ref]struct{}{},
		tenants:           map[string]map[Ref]int{},
		changed:           make(chan struct{}),
		holds:             map[string]*budgetHold{},
	}
	if r.linger <= 0 {
		r.linger = DefaultLinger
	}
	if r.expectationTTL <= 0 {
		r.expectationTTL = defaultExpectationTTL
	}
	if r.writeHold <= 0 {
		r.writeHold = defaultWriteHold
	}
	if r.retryMaxDelay <= 0 {
		r.retryMaxDelay = defaultRetryMaxDelay
	}
	if r.transform == nil {
		r.transform = DropManagedFields
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	r.epoch = r.clock.Now()
	r.logInformers = r.log.GetSink() != nil
	if !r.logInformers {
		r.log = logr.Discard()
	}
	r.metrics = newMetrics()
	return r, nil
}

// Start starts the informers of the refs tracked so far and returns: it does
// not block, so the registry fits any manager of long-running components.
// Until ctx is done the registry stops lingering informers once their linger
// has passed, retries failed ones (Options.RetryFailed) and expires stale
// expectations; then it stops every informer, and Done is closed once all
// have exited. It fails if the registry was started before: a registry
// cannot be run twice.
func (r *Registry[K]) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runCtx != nil || r.closed {
		return errors.New("watchregistry: already started")
	}
	r.runCtx = ctx
	for _, e := range r.entries {
		if e.cancel == nil && !e.state.failed() {
			r.startLocked(e)
		}
	}
	go r.loop(ctx)
	r.log.V(1).Info("Watch registry running")
	return nil
}

// Run is the blocking form of Start: it starts the registry and returns once
// ctx is done and every informer has exited. A second call logs an error and
// returns at once.
func (r *Registry[K]) Run(ctx context.Context) {
	if err := r.Start(ctx); err != nil {
		r.log.Error(err, "Run called on a registry that was started before; ignoring")
		return
	}
	<-r.done
}

// Done is closed once a started registry has stopped: its context is done
// and every informer has exited.
func (r *Registry[K]) Done() <-chan struct{} { return r.done }

func (r *Registry[K]) loop(ctx context.Context) {
	defer close(r.done)
	sweep := r.clock.NewTicker(min(r.expectationTTL, lateExpectationTTL))
	defer sweep.Stop()
	for {
		now := r.clock.Now()
		next := earliest(earliest(r.expireIdle(now), r.retryDue(now)), earliest(r.releaseExpiredHolds(now), r.expireHolds(now)))
		var timer clock.Timer
		var timerC <-chan time.Time
		if !next.IsZero() {
			timer = r.clock.NewTimer(next.Sub(now))
			timerC = timer.C()
			// A clock that moved past next since now was read (a fake
			// clock stepped meanwhile) would leave the timer a step
			// late: look again at once instead.
			if later := r.clock.Now(); later.After(now) && !later.Before(next) {
				timer.Stop()
				continue
			}
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			r.shutdown()
			return
		case <-timerC:
		case <-r.kick:
		case <-sweep.C():
			r.resume(r.exp.sweep(r.clock.Now()))
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// earliest returns the earlier of two deadlines, a zero time meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func (r *Registry[K]) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *Registry[K]) shutdown() {
	r.mu.Lock()
	r.closed = true
	for _, e := range r.entries {
		if !e.state.failed() {
			e.stopLocked(StateStopped, nil)
		}
	}
	r.changedLocked()
	r.mu.Unlock()
	// Informer contexts derive from Start's, so they are already cancelled;
	// wait for their goroutines so that nothing outlives Run.
	r.informers.Wait()
	r.log.V(1).Info("Watch registry stopped")
}

// changedLocked wakes the WaitForSync calls: some entry changed state.
func (r *Registry[K]) changedLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// expireIdle stops informers whose linger has passed and returns the next
// linger deadline, or the zero time when none is pending.
func (r *Registry[K]) expireIdle(now time.Time) time.Time {
	var next time.Time
	r.mu.Lock()
	defer r.mu.Unlock()
	for ref, e := range r.entries {
		if len(e.refs) > 0 || e.idleSince.IsZero() {
			continue
		}
		deadline := e.idleSince.Add(r.linger)
		if now.Before(deadline) {
			next = earliest(next, deadline)
			continue
		}
		e.stopLocked(StateStopped, nil)
		delete(r.entries, ref)
		r.changedLocked()
		e.log.V(1).Info("Informer stopped: no owner needed it for the linger period", "linger", r.linger)
	}
	return next
}

// releaseExpiredHolds delivers the events held for writes in flight past
// Options.WriteHold, and returns the next such deadline, or the zero time
// when no event is held.
func (r *Registry[K]) releaseExpiredHolds(now time.Time) time.Time {
	released, next := r.exp.releaseExpired(now)
	if len(released) > 0 {
		r.log.V(1).Info("Writes in flight past the hold; their objects' events are delivered", "events", len(released), "hold", r.writeHold)
	}
	r.resume(released)
	return next
}

// resume handles again, in order, events that were held; callers must not
// hold r.mu.
func (r *Registry[K]) resume(held []func()) {
	for _, fn := range held {
		fn()
	}
}

// retryDue replaces the failed informers whose retry is due with fresh ones
// and returns the next retry deadline, or the zero time when none is
// pending. Only Options.RetryFailed schedules retries.
func (r *Registry[K]) retryDue(now time.Time) time.Time {
	var next time.Time
	changed := false
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return next
	}
	for ref, e := range r.entries {
		if e.retryAt.IsZero() {
			continue
		}
		if h, held := r.heldLocked(ref.Cluster, now); held {
			// Its cluster went over its budget since: no list before the
			// hold ends.
			e.retryAt = h.until
		}
		if !now.Before(e.retryAt) && !r.retryRoomLocked(ref.Cluster) {
			// No room within Options.Informers: another try later.
			e.attempts++
			e.retryAt = now.Add(r.backoff(e.attempts))
		}
		if now.Before(e.retryAt) {
			next = earliest(next, e.retryAt)
			continue
		}
		e.retryAt = time.Time{}
		c, ok := r.clusters[ref.Cluster]
		if !ok || len(e.refs) == 0 {
			// No retry any more: WaitForSync returns the failure now.
			changed = true
			continue
		}
		fresh, err := r.newEntry(ref, c, e)
		if err != nil {
			e.log.Error(err, "Cannot retry the informer")
			changed = true
			continue
		}
		fresh.log.V(1).Info("Retrying informer", "previousState", e.state, "attempt", fresh.attempts)
		r.replaceLocked(e, fresh)
	}
	if changed {
		r.changedLocked()
	}
	return next
}

// backoff returns the delay before the retry that follows the given number
// of consecutive failures: one second, doubling, capped at RetryMaxDelay.
func (r *Registry[K]) backoff(failures int) time.Duration {
	d := retryBaseDelay
	for i := 1; i < failures && d < r.retryMaxDelay; i++ {
		d *= 2
	}
	return min(d, r.retryMaxDelay)
}

// SetCluster adds or replaces the clients of a cluster; "" is the local
// cluster. Replacing a cluster's clients (new credentials, another server)
// stops its informers: their refs turn StateStopped and their owners receive
// EventStateChanged, so that they Track again and get fresh informers on the
// new clients. With MetadataOnly only md is used, otherwise only dyn.
//
// WithBudget bounds the objects the cluster's caches hold (see Budget).
// A cluster that went over its budget stays on hold when its clients are
// replaced: new clients do not make its informers list again any sooner.
func (r *Registry[K]) SetCluster(name string, dyn dynamic.Interface, md metadata.Interface, opts ...ClusterOption) {
	c := &clusterClients{name: name, dyn: dyn, md: md}
	for _, o := range opts {
		o(c)
	}
	r.mu.Lock()
	_, replaced := r.clusters[name]
	r.clusters[name] = c
	var tell []notice[K]
	if replaced {
		tell = r.stopClusterLocked(name, false)
	}
	r.mu.Unlock()
	r.log.V(1).Info("Cluster clients set", "cluster", name, "replaced", replaced, "budget", c.budget != nil)
	r.tell(tell)
}

// RemoveCluster forgets a cluster's clients and stops its informers; their
// owners receive EventStateChanged, and tracking a ref of the cluster fails
// until SetCluster adds it again.
func (r *Registry[K]) RemoveCluster(name string) {
	r.mu.Lock()
	_, known := r.clusters[name]
	delete(r.clusters, name)
	var tell []notice[K]
	if known {
		tell = r.stopClusterLocked(name, false)
	}
	r.mu.Unlock()
	r.log.V(1).Info("Cluster removed", "cluster", name)
	r.tell(tell)
}

// SetLabelSelector changes the label selector of every informer, as
// Options.LabelSelector set it: SetLabelSelectors with one selector.
func (r *Registry[K]) SetLabelSelector(selector string) error {
	return r.SetLabelSelectors(selector)
}

// SetLabelSelectors scopes the informers to the objects that any of
// selectors selects, with one informer per selector and ref; they should
// select disjoint sets of objects, or an object two of them select has its
// events delivered twice. Setting the current selectors changes nothing.
//
// Adding selectors to the current ones and removing none widens the scope
// without a restart: the informers running keep their caches and go on
// delivering events, and each ref gets an informer of every added selector.
// Until those have listed, the ref is Pending again (reads fail with
// ErrNotSynced, WaitForSync waits); then its owners, and the owners of the
// objects listed, receive EventInitialList, as after a first list. A replica
// of a sharded operator that gains buckets lists only theirs, that way. An
// added selector that was prepared (see Prepare) brings its informers along
// instead: those that have listed join at once, and the ref stays Synced
// (unless it was Pending already, or another selector added with it is
// still listing); the owners of the objects they saw receive
// EventInitialList once the ref is synced.
//
// Any other change restarts every informer: the informers running stop,
// their refs turn StateStopped and their owners receive EventStateChanged,
// so that they Track again and get informers of the new scope (a replica
// whose share of the objects shrank, for one).
func (r *Registry[K]) SetLabelSelectors(selectors ...string) error {
	if len(selectors) == 0 {
		return errors.New("watchregistry: no label selector; \"\" selects every object")
	}
	want, err := parseSelectors(selectors)
	if err != nil {
		return err
	}
	r.mu.Lock()
	old := r.selectors
	var added []string
	for _, sel := range want {
		if !slices.Contains(old, sel) {
			added = append(added, sel)
		}
	}
	if len(added) == 0 && len(want) == len(old) {
		r.mu.Unlock()
		return nil
	}
	r.prepared = slices.DeleteFunc(slices.Clone(r.prepared), func(sel string) bool { return slices.Contains(want, sel) })
	if len(want) != len(old)+len(added) {
		r.selectors = want
		var tell []notice[K]
		for name := range r.clusters {
			tell = append(tell, r.stopClusterLocked(name, true)...)
		}
		r.mu.Unlock()
		r.log.V(1).Info("Label selectors changed; informers restarted", "selectors", want, "owners", len(tell))
		r.tell(tell)
		return nil
	}
	r.selectors = append(slices.Clip(old), added...)
	var tell []notice[K]
	wake := map[*entry[K]][]K{}
	for _, e := range r.entries {
		if e.state.failed() || e.ref.LabelSelector != "" {
			// Replaced, with every selector, when tracked again; or
			// scoped by its ref's own selector.
			continue
		}
		for _, sel := range added {
			if i := slices.IndexFunc(e.parts, func(p *part[K]) bool { return p.selector == sel }); i >= 0 {
				wake[e] = append(wake[e], r.promoteLocked(e, e.parts[i])...)
				continue
			}
			if err := r.widenLocked(e, sel); err != nil {
				tell = append(tell, r.failPartLocked(e, err)...)
				break
			}
		}
		// Only now is the entry's state final: a listed prepared informer
		// joining a ref still Pending (its first list, or another selector
		// of this call listing) would wake owners whose reads fail with
		// ErrNotSynced, and who are not woken again when it syncs. They
		// are woken with the others then.
		if keys := wake[e]; len(keys) > 0 && e.state == StatePending {
			e.initMu.Lock()
			e.addInitKeysLocked(keys)
			e.initMu.Unlock()
			delete(wake, e)
		}
	}
	r.changedLocked()
	r.mu.Unlock()
	r.tell(tell)
	for e, keys := range wake {
		ev := Event{Ref: e.ref, Type: EventInitialList}
		for _, k := range keys {
			if e.stopped.Load() {
				break
			}
			r.enqueue(k, ev)
			r.stats.delivered[eventTypeIndex(EventInitialList)].Add(1)
		}
	}
	r.log.V(1).Info("Label selectors added; informers widened", "added", added)
	return nil
}

// Prepare starts, for every ref, an informer of each of selectors that is
// not in the scope yet, so that a SetLabelSelectors adding it later finds
// its list done. A prepared informer lists and watches, but is not part of
// the scope until then: reads do not see its cache, its events are not
// delivered (the owners of the objects it saw are woken when it joins), and
// the ref's state does not wait for it. A sharded operator prepares the
// buckets it would gain should a member that stopped renewing its Lease be
// gone, so that taking them over does not wait for their lists.
//
// Prepare replaces the prepared selectors: the informers of those it no
// longer names stop, and Prepare() stops them all. Selectors already in the
// scope are left as they are. Refs tracked later get informers of the
// prepared selectors too.
func (r *Registry[K]) Prepare(selectors ...string) error {
	want, err := parseSelectors(selectors)
	if err != nil {
		return err
	}
	r.mu.Lock()
	want = slices.DeleteFunc(want, func(sel string) bool { return slices.Contains(r.selectors, sel) })
	if slices.Equal(want, r.prepared) {
		r.mu.Unlock()
		return nil
	}
	r.prepared = want
	var tell []notice[K]
	for _, e := range r.entries {
		if e.state.failed() || e.ref.LabelSelector != "" {
			continue
		}
		if err := r.prepareLocked(e, want); err != nil {
			tell = append(tell, r.failPartLocked(e, err)...)
		}
	}
	r.changedLocked()
	r.mu.Unlock()
	r.tell(tell)
	r.log.V(1).Info("Label selectors prepared", "prepared", want)
	return nil
}

// failPartLocked stops an entry that could not get an informer of a
// selector, and returns its owners to tell. Not expected: the clients that
// built the entry's first informer build the others. Should it happen, the
// owners track again, for a fresh entry.
func (r *Registry[K]) failPartLocked(e *entry[K], err error) []notice[K] {
	e.log.Error(err, "Cannot add an informer of a label selector; stopping the ref's informers")
	e.stopLocked(StateStopped, &StateError{Ref: e.ref, State: StateStopped, Err: err})
	if len(e.refs) == 0 {
		delete(r.entries, e.ref)
	}
	return e.notices(nil)
}

// parseSelectors checks label selectors and drops repeats.
func parseSelectors(selectors []string) ([]string, error) {
	var want []string
	for _, sel := range selectors {
		if _, err := labels.Parse(sel); err != nil {
			return nil, fmt.Errorf("watchregistry: label selector %q: %w", sel, err)
		}
		if !slices.Contains(want, sel) {
			want = append(want, sel)
		}
	}
	return want, nil
}

// stopClusterLocked stops every informer of the cluster and returns the
// owners to tell. Refs with owners stay bound, as StateStopped, so that
// State and Get explain what happened until the owners track anew. With
// scopeOnly, the informers of refs with a label selector of their own,
// which the registry's scope does not concern, keep running.
func (r *Registry[K]) stopClusterLocked(name string, scopeOnly bool) []notice[K] {
	var tell []notice[K]
	for ref, e := range r.entries {
		if ref.Cluster != name || (scopeOnly && ref.LabelSelector != "") {
			continue
		}
		e.stopLocked(StateStopped, nil)
		if len(e.refs) == 0 {
			delete(r.entries, ref)
			continue
		}
		tell = append(tell, e.notices(nil)...)
		e.log.Info("Informer stopped: its cluster's clients or the label selector changed")
	}
	r.changedLocked()
	return tell
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

// BeginWrite declares the owner's own create, update, patch or apply of
// obj (its namespace and name are read) through ref, about to be sent; call
// it right before the request and end the returned Write with Done and the
// API server's answer, or with Abort when the request failed. The watch
// often delivers a write's event before its answer reaches the writer, when
// ExpectWrite would come too late: while the write is in flight, every event
// of the object is held, and once it has ended, the event of the version it
// produced is filtered as own-write and any other is delivered. An event is
// held for Options.WriteHold at most. Holding costs nothing but a map entry:
// no goroutine, no timer per write. A nil Registry returns a nil Write,
// whose methods do nothing.
func (r *Registry[K]) BeginWrite(ref Ref, obj metav1.Object) *Write {
	if r == nil {
		return nil
	}
	k := keyOf(ref, obj.GetNamespace(), obj.GetName())
	return &Write{sink: r, ref: ref, key: k, id: r.exp.beginWrite(k, r.clock.Now().Add(r.writeHold))}
}

// Write is a write declared with BeginWrite. Its methods are safe for
// concurrent use; only the first Done or Abort counts.
type Write struct {
	sink  writeSink
	ref   Ref
	key   objectKey
	id    uint64
	ended atomic.Bool
}

// writeSink is the Registry, whatever its owner key type.
type writeSink interface {
	endWrite(w *Write, answer metav1.Object)
}

// Done ends the write with the object the API server answered (its
// namespace, name and resourceVersion are read; a PartialObjectMetadata
// will do): the event of that version is not delivered, whether it was held
// or is still to come, and the events held meanwhile are handled. Call it
// from the writer's goroutine: a held event another owner must see is
// delivered, through Map and Enqueue, before Done returns.
func (w *Write) Done(answer metav1.Object) {
	if w == nil || w.ended.Swap(true) {
		return
	}
	w.sink.endWrite(w, answer)
}

// Abort ends a write that failed, or whose answer is unknown: the events
// held meanwhile are delivered, as if it had not been declared.
func (w *Write) Abort() {
	if w == nil || w.ended.Swap(true) {
		return
	}
	w.sink.endWrite(w, nil)
}

// End ends the write with a request's answer and error: Done with the
// answer when err is nil, Abort otherwise.
func (w *Write) End(answer metav1.Object, err error) {
	if err != nil || answer == nil {
		w.Abort()
		return
	}
	w.Done(answer)
}

func (r *Registry[K]) endWrite(w *Write, answer metav1.Object) {
	// The expectation first: the held event of the write's version must
	// find it when it is handled again.
	if answer != nil {
		r.ExpectWrite(w.ref, answer)
	}
	r.resume(r.exp.endWrite(w.key, w.id))
}

// ExpectWrite announces the owner's own create, update or apply of obj, as
// the API server answered it (its namespace, name and resourceVersion are
// read): the add or update event of that version is not delivered (counted
// as own-write), by whichever informer of ref's cluster and resource
// delivers it. Call it right after the write returns; when the event may
// come first, as it often does, declare the write beforehand with
// BeginWrite instead, whose Done calls ExpectWrite. Unused expectations
// expire after Options.ExpectationTTL. Without the object at hand,
// &metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv} will do.
func (r *Registry[K]) ExpectWrite(ref Ref, obj metav1.Object) {
	rv := obj.GetResourceVersion()
	if rv == "" {
		return
	}
	ns, name := obj.GetNamespace(), obj.GetName()
	// When the cache already holds the version, its event has come first
	// and is handled or about to be (the cache is updated before handlers
	// run): the expectation is needed for moments at most, not for the TTL.
	ttl := r.expectationTTL
	if r.cached(ref, ns, name, rv) {
		ttl = min(ttl, lateExpectationTTL)
	}
	r.exp.expectWrite(keyOf(ref, ns, name), rv, r.clock.Now().Add(ttl))
}

// lateExpectationTTL bounds an expectation whose event reached the cache
// before ExpectWrite was called.
const lateExpectationTTL = 5 * time.Second

// cached reports whether the cache serving ref holds the object at
// resourceVersion.
func (r *Registry[K]) cached(ref Ref, namespace, name, resourceVersion string) bool {
	p, found, err := r.lookup(ref, namespace, name)
	return err == nil && found && p.ResourceVersion == resourceVersion
}

// ExpectDelete announces the owner's own delete of obj (its namespace, name
// and UID are read; call it before deleting): its delete event is not
// delivered (counted as own-write). With a UID, only that object's delete
// matches, from any informer; the delete of an object re-created under the
// same name since is delivered. Without one, the first delete of the name
// matches. Unused expectations expire after Options.ExpectationTTL.
func (r *Registry[K]) ExpectDelete(ref Ref, obj metav1.Object) {
	r.exp.expectDelete(keyOf(ref, obj.GetNamespace(), obj.GetName()), obj.GetUID(), r.clock.Now().Add(r.expectationTTL))
}

// UnexpectDelete withdraws ExpectDelete(ref, obj) when the delete failed
// (other than with NotFound): else, for Options.ExpectationTTL, someone
// else's delete of that object would be taken for the owner's own, and not
// delivered. An expectation some delete event has matched already, or one
// for another UID, is left as it is. When the failed delete did happen (a
// timeout after the API server acted), its event is delivered: a spare
// wake-up, where a kept expectation could hide a real one.
func (r *Registry[K]) UnexpectDelete(ref Ref, obj metav1.Object) {
	r.exp.unexpectDelete(keyOf(ref, obj.GetNamespace(), obj.GetName()), obj.GetUID())
}

// AwaitDelete is for an owner that deleted obj (ExpectDelete) and found it
// still there, held by a finalizer, and now waits for it to go: the
// expectation is withdrawn, so that the delete event, whenever the
// finalizer lets the object go, is delivered and wakes the owner rather
// than being taken for the owner's own write (the owner's next look would
// otherwise wait for a resync or a backoff). It reports whether that event
// has been seen already: then the object is gone, and there is nothing to
// wait for. For the delete's own UID only, as UnexpectDelete.
func (r *Registry[K]) AwaitDelete(ref Ref, obj metav1.Object) (gone bool) {
	return r.exp.unexpectDelete(keyOf(ref, obj.GetNamespace(), obj.GetName()), obj.GetUID())
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

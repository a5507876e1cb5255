package watchregistry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

const (
	defaultLinger           = 2 * time.Minute
	defaultExpectationTTL   = time.Minute
	defaultMetricsNamespace = "watchregistry"
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
	// ExpectationTTL bounds how long ExpectWrite and ExpectDelete are
	// remembered when their event never comes. Zero or less means one minute.
	ExpectationTTL time.Duration
	// FieldManager is the field manager of the owners' own writes, if they
	// all use one. An added object whose managedFields, as served, name this
	// manager alone was created by an owner's write, and its event is
	// filtered as an own write even when ExpectWrite has not been called
	// yet: the watch often delivers a creation before the write's answer
	// reaches the writer, and waking the owner for its own creation costs a
	// reconcile per object.
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
	// DropManagedFields. It always receives *unstructured.Unstructured, also
	// with MetadataOnly. It must be idempotent and may mutate its argument.
	Transform cache.TransformFunc
	// NoTransform keeps objects exactly as served, ignoring Transform.
	NoTransform bool
	// Keep, if set, decides which objects the caches hold. An object it
	// rejects (one that matches the label selector but that no owner can
	// own, such as an object someone else labelled) is held only as a stub
	// of its name, namespace and resourceVersion: Get and List do not see
	// it, Map is not called for it, and its events are counted as
	// FilterRejected. An object that becomes rejected is delivered as
	// EventDeleted, one that stops being rejected as EventAdded. Keep runs
	// on the informer's goroutine, before Transform, and should be quick.
	Keep func(*unstructured.Unstructured) bool
	// DeliverStatusOnly delivers updates that change only status and
	// bookkeeping metadata; by default they are filtered.
	DeliverStatusOnly bool
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
	// Clock drives linger and expectation expiry; nil means the real clock.
	Clock clock.WithTicker
	// Logger receives the registry's logs and, through the informers'
	// contexts, client-go's, with the keys cluster, gvr, namespace and owner.
	// The zero value discards the registry's logs and leaves client-go's to
	// the logger of Run's context (klog's by default).
	Logger logr.Logger
	// MetricsNamespace prefixes the Prometheus metric names; "" means
	// "watchregistry".
	MetricsNamespace string
}

// Registry owns the lifecycle of dynamic (or metadata) informers for owners
// of type K, e.g. cache.ObjectName of the custom resources of an operator.
// Owners declare what they need with Track; the registry runs one informer
// per Ref, delivers the events that matter through Map and Enqueue, serves
// reads from the caches, and stops informers nobody needs.
//
// All methods are safe for concurrent use. The caches hold objects in a
// compact encoded form: Get and List decode a fresh copy on every call, which
// the caller owns and may mutate, and each delivered event carries its own.
//
// Registry implements prometheus.Collector.
type Registry[K comparable] struct {
	mapFn             func(Event) []K
	enqueue           func(K, Event)
	selector          string
	linger            time.Duration
	expectationTTL    time.Duration
	fieldManager      string
	transform         cache.TransformFunc
	keep              func(*unstructured.Unstructured) bool
	deliverStatusOnly bool
	metadataOnly      bool
	kindFor           func(schema.GroupVersionResource) (schema.GroupVersionKind, error)
	clock             clock.WithTicker
	log               logr.Logger
	// logInformers says whether client-go's informer logs go to log too.
	logInformers bool

	exp   expectations
	stats counters
	descs descs
	// kick wakes Run when an informer starts lingering, so that its expiry
	// is scheduled.
	kick chan struct{}

	// informers counts the goroutines of started informers, so that Run can
	// return only once every one has exited.
	informers sync.WaitGroup

	mu sync.Mutex
	// runCtx is Run's context, the parent of every informer's; nil until Run
	// starts. Entries tracked earlier wait for it.
	runCtx   context.Context
	closed   bool
	clusters map[string]*clusterClients
	entries  map[Ref]*entry[K]
	owners   map[K]map[Ref]struct{}
}

type clusterClients struct {
	dyn dynamic.Interface
	md  metadata.Interface
}

// New returns a registry; call Run to start it and SetCluster (with "" for
// the local cluster) to give it clients. Refs may be tracked before Run: their
// informers start when Run does.
func New[K comparable](opts Options[K]) (*Registry[K], error) {
	if opts.Map == nil || opts.Enqueue == nil {
		return nil, errors.New("watchregistry: Options.Map and Options.Enqueue are required")
	}
	if _, err := labels.Parse(opts.LabelSelector); err != nil {
		return nil, fmt.Errorf("watchregistry: label selector %q: %w", opts.LabelSelector, err)
	}
	r := &Registry[K]{
		mapFn:             opts.Map,
		enqueue:           opts.Enqueue,
		selector:          opts.LabelSelector,
		linger:            opts.Linger,
		expectationTTL:    opts.ExpectationTTL,
		fieldManager:      opts.FieldManager,
		transform:         opts.Transform,
		keep:              opts.Keep,
		deliverStatusOnly: opts.DeliverStatusOnly,
		metadataOnly:      opts.MetadataOnly,
		kindFor:           opts.KindFor,
		clock:             opts.Clock,
		log:               opts.Logger,
		kick:              make(chan struct{}, 1),
		clusters:          map[string]*clusterClients{},
		entries:           map[Ref]*entry[K]{},
		owners:            map[K]map[Ref]struct{}{},
	}
	if r.linger <= 0 {
		r.linger = defaultLinger
	}
	if r.expectationTTL <= 0 {
		r.expectationTTL = defaultExpectationTTL
	}
	if r.transform == nil {
		r.transform = DropManagedFields
	}
	if opts.NoTransform {
		r.transform = nil
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	r.logInformers = r.log.GetSink() != nil
	if !r.logInformers {
		r.log = logr.Discard()
	}
	ns := opts.MetricsNamespace
	if ns == "" {
		ns = defaultMetricsNamespace
	}
	r.descs = newDescs(ns)
	return r, nil
}

var _ prometheus.Collector = (*Registry[string])(nil)

// Run starts the informers of the refs tracked so far, stops lingering
// informers once their linger has passed, and expires stale expectations. It
// blocks until ctx is done, then stops every informer and returns when all
// have exited; the registry cannot be run again.
func (r *Registry[K]) Run(ctx context.Context) {
	r.mu.Lock()
	if r.runCtx != nil || r.closed {
		r.mu.Unlock()
		r.log.Error(nil, "Run called more than once; ignoring")
		return
	}
	r.runCtx = ctx
	for _, e := range r.entries {
		if e.cancel == nil && !e.state.failed() {
			r.startLocked(e)
		}
	}
	r.mu.Unlock()
	r.log.V(1).Info("Watch registry running")

	sweep := r.clock.NewTicker(min(r.expectationTTL, lateExpectationTTL))
	defer sweep.Stop()
	for {
		now := r.clock.Now()
		next := r.expireIdle(now)
		var timer clock.Timer
		var timerC <-chan time.Time
		if !next.IsZero() {
			timer = r.clock.NewTimer(next.Sub(now))
			timerC = timer.C()
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
			r.exp.sweep(r.clock.Now())
		}
		if timer != nil {
			timer.Stop()
		}
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
	r.mu.Unlock()
	// Informer contexts derive from Run's, so they are already cancelled;
	// wait for their goroutines so that nothing outlives Run.
	r.informers.Wait()
	r.log.V(1).Info("Watch registry stopped")
}

// expireIdle stops informers whose linger has passed and returns the next
// linger deadline, or the zero time when none is pending.
func (r *Registry[K]) expireIdle(now time.Time) time.Time {
	var next time.Time
	r.mu.Lock()
	defer r.mu.Unlock()
	for ref, e := range r.entries {
		if len(e.owners) > 0 || e.idleSince.IsZero() {
			continue
		}
		deadline := e.idleSince.Add(r.linger)
		if now.Before(deadline) {
			if next.IsZero() || deadline.Before(next) {
				next = deadline
			}
			continue
		}
		e.stopLocked(StateStopped, nil)
		delete(r.entries, ref)
		e.log.V(1).Info("Informer stopped: no owner needed it for the linger period", "linger", r.linger)
	}
	return next
}

// SetCluster adds or replaces the clients of a cluster; "" is the local
// cluster. Replacing a cluster's clients (new credentials, another server)
// stops its informers: their refs turn StateStopped and their owners receive
// EventStateChanged, so that they Track again and get fresh informers on the
// new clients. With MetadataOnly only md is used, otherwise only dyn.
func (r *Registry[K]) SetCluster(name string, dyn dynamic.Interface, md metadata.Interface) {
	r.mu.Lock()
	_, replaced := r.clusters[name]
	r.clusters[name] = &clusterClients{dyn: dyn, md: md}
	var tell map[Ref][]K
	if replaced {
		tell = r.stopClusterLocked(name)
	}
	r.mu.Unlock()
	r.log.V(1).Info("Cluster clients set", "cluster", name, "replaced", replaced)
	for ref, owners := range tell {
		r.tell(ref, owners)
	}
}

// RemoveCluster forgets a cluster's clients and stops its informers; their
// owners receive EventStateChanged, and tracking a ref of the cluster fails
// until SetCluster adds it again.
func (r *Registry[K]) RemoveCluster(name string) {
	r.mu.Lock()
	_, known := r.clusters[name]
	delete(r.clusters, name)
	var tell map[Ref][]K
	if known {
		tell = r.stopClusterLocked(name)
	}
	r.mu.Unlock()
	r.log.V(1).Info("Cluster removed", "cluster", name)
	for ref, owners := range tell {
		r.tell(ref, owners)
	}
}

// stopClusterLocked stops every informer of the cluster and returns the
// owners to tell, by ref. Refs with owners stay, as StateStopped, so that
// State and Get explain what happened until the owners track anew.
func (r *Registry[K]) stopClusterLocked(name string) map[Ref][]K {
	tell := map[Ref][]K{}
	for ref, e := range r.entries {
		if ref.Cluster != name {
			continue
		}
		e.stopLocked(StateStopped, nil)
		if len(e.owners) == 0 {
			delete(r.entries, ref)
			continue
		}
		for k := range e.owners {
			tell[ref] = append(tell[ref], k)
		}
		e.log.Info("Informer stopped: cluster clients replaced or removed")
	}
	return tell
}

// Track replaces the whole set of refs the owner needs, atomically: informers
// for new refs are acquired (started on first interest) before the ones the
// owner no longer needs are released, so that an object moving between refs
// is never unwatched. A ref that is Forbidden, Gone or Stopped gets a fresh
// informer, which is how an owner retries once RBAC or a CRD is fixed. Track
// never blocks on the API server. It fails, changing nothing, for a ref of an
// unknown cluster or an invalid ref, and after the registry has shut down.
func (r *Registry[K]) Track(owner K, refs []Ref) error {
	want := make(map[Ref]struct{}, len(refs))
	for _, ref := range refs {
		if err := ref.validate(); err != nil {
			return fmt.Errorf("track for owner %v: %w", owner, err)
		}
		want[ref] = struct{}{}
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fmt.Errorf("track for owner %v: registry has shut down: %w", owner, ErrStopped)
	}
	// Build every informer the new set needs before changing anything, so that
	// a failing Track leaves the owner's set as it was.
	fresh := map[Ref]*entry[K]{}
	for ref := range want {
		c, ok := r.clusters[ref.Cluster]
		if !ok {
			return fmt.Errorf("track %s for owner %v: unknown cluster %q (add it with SetCluster)", ref, owner, ref.Cluster)
		}
		if e := r.entries[ref]; e != nil && !e.state.failed() {
			continue
		}
		e, err := r.newEntry(ref, c, r.entries[ref])
		if err != nil {
			return fmt.Errorf("track %s for owner %v: %w", ref, owner, err)
		}
		fresh[ref] = e
	}
	for ref, e := range fresh {
		if old := r.entries[ref]; old != nil {
			e.log.V(1).Info("Restarting informer", "owner", owner, "previousState", old.state)
		} else {
			e.log.V(1).Info("Informer requested", "owner", owner)
		}
		r.entries[ref] = e
		if r.runCtx != nil {
			r.startLocked(e)
		}
	}
	for ref := range want {
		e := r.entries[ref]
		e.owners[owner] = struct{}{}
		e.idleSince = time.Time{}
	}
	for ref := range r.owners[owner] {
		if _, keep := want[ref]; !keep {
			r.releaseLocked(owner, ref)
		}
	}
	if len(want) == 0 {
		delete(r.owners, owner)
	} else {
		r.owners[owner] = want
	}
	r.log.V(2).Info("Tracking", "owner", owner, "refs", len(want), "started", len(fresh))
	return nil
}

// Forget releases every ref of the owner, as Track(owner, nil) does.
func (r *Registry[K]) Forget(owner K) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ref := range r.owners[owner] {
		r.releaseLocked(owner, ref)
	}
	delete(r.owners, owner)
	r.log.V(2).Info("Forgotten", "owner", owner)
}

// releaseLocked drops the owner from the ref; an informer left without owners
// lingers, unless nothing runs for it anyway.
func (r *Registry[K]) releaseLocked(owner K, ref Ref) {
	e := r.entries[ref]
	if e == nil {
		return
	}
	delete(e.owners, owner)
	delete(e.notified, owner)
	if len(e.owners) > 0 {
		return
	}
	if e.state.failed() || e.cancel == nil {
		// Ended, or never started because Run has not begun: nothing to keep
		// warm.
		e.stopLocked(e.state, e.err)
		delete(r.entries, ref)
		return
	}
	e.idleSince = r.clock.Now()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// State returns the state of the ref's informer, StateNotTracked when there
// is none.
func (r *Registry[K]) State(ref Ref) State {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[ref]; e != nil {
		return e.state
	}
	return StateNotTracked
}

// Synced reports whether the ref's cache is ready to read.
func (r *Registry[K]) Synced(ref Ref) bool { return r.State(ref) == StateSynced }

// indexer returns the cache of a synced ref, or the typed error saying why
// it cannot be read.
func (r *Registry[K]) indexer(ref Ref) (cache.Indexer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[ref]
	if e == nil {
		return nil, fmt.Errorf("%s: %w", ref, ErrNotTracked)
	}
	switch e.state {
	case StateSynced:
		return e.informer.GetIndexer(), nil
	case StatePending:
		return nil, fmt.Errorf("%s: %w", ref, ErrNotSynced)
	default:
		return nil, e.err
	}
}

// Get returns an object from the ref's cache. It fails with an apierrors
// NotFound error when the cache does not hold it, ErrNotSynced before the
// initial list completed (it never blocks), a StateError matching
// ErrForbidden, ErrGone or ErrStopped when the informer ended, and
// ErrNotTracked for an unknown ref. namespace is "" for cluster-scoped
// objects. The object is decoded for this call: the caller's to mutate.
func (r *Registry[K]) Get(ref Ref, namespace, name string) (*unstructured.Unstructured, error) {
	p, found, err := r.lookup(ref, namespace, name)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, notFound(ref.GVR, name)
	}
	u, err := p.unpack()
	if err != nil {
		return nil, fmt.Errorf("get %s/%s from %s: %w", namespace, name, ref, err)
	}
	return u, nil
}

// lookup returns the cached form of an object, without decoding it; found is
// false when the cache does not hold it. Errors are those Get documents.
func (r *Registry[K]) lookup(ref Ref, namespace, name string) (p *packed, found bool, err error) {
	if ref.Namespace != "" && namespace != ref.Namespace {
		return nil, false, fmt.Errorf("get %s/%s: namespace outside the scope of %s", namespace, name, ref)
	}
	idx, err := r.indexer(ref)
	if err != nil {
		return nil, false, fmt.Errorf("get %s/%s: %w", namespace, name, err)
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, ok, err := idx.GetByKey(key)
	if err != nil {
		return nil, false, fmt.Errorf("get %s/%s from %s: %w", namespace, name, ref, err)
	}
	if !ok {
		return nil, false, nil
	}
	p, ok = obj.(*packed)
	if !ok {
		return nil, false, fmt.Errorf("get %s/%s from %s: the transform left a %T", namespace, name, ref, obj)
	}
	if p.rejected {
		return nil, false, nil
	}
	return p, true, nil
}

// List returns the cached objects of the ref in namespace ("" for all the ref
// covers) that match selector (nil for all), sorted by namespace and name. It
// fails like Get. The objects are decoded for this call: the caller's to
// mutate. Only the objects that match are decoded, so a narrow selector keeps
// a List over a large cache cheap.
func (r *Registry[K]) List(ref Ref, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	if ref.Namespace != "" && namespace != "" && namespace != ref.Namespace {
		return nil, fmt.Errorf("list in namespace %s: outside the scope of %s", namespace, ref)
	}
	idx, err := r.indexer(ref)
	if err != nil {
		return nil, fmt.Errorf("list in namespace %q: %w", namespace, err)
	}
	var objs []any
	if namespace == "" || ref.Namespace != "" {
		objs = idx.List()
	} else if objs, err = idx.ByIndex(cache.NamespaceIndex, namespace); err != nil {
		return nil, fmt.Errorf("list %s in namespace %s: %w", ref, namespace, err)
	}
	out, err := decodeSorted(objs, selector)
	if err != nil {
		return nil, fmt.Errorf("list %s in namespace %q: %w", ref, namespace, err)
	}
	return out, nil
}

// ExpectWrite announces the owner's own create, update or apply of an
// object, which the API server answered with resourceVersion: the add or
// update event at that resourceVersion is not delivered (counted as
// own-write). Call it right after the write returns. Unused expectations
// expire after Options.ExpectationTTL.
func (r *Registry[K]) ExpectWrite(ref Ref, namespace, name, resourceVersion string) {
	if resourceVersion == "" {
		return
	}
	// When the cache already holds the version, its event has come first
	// and is handled or about to be (the cache is updated before handlers
	// run): the expectation is needed for moments at most, not for the TTL.
	ttl := r.expectationTTL
	if r.cached(ref, namespace, name, resourceVersion) {
		ttl = min(ttl, lateExpectationTTL)
	}
	r.exp.expectWrite(expectationKey{ref, namespace, name}, resourceVersion, r.clock.Now().Add(ttl))
}

// lateExpectationTTL bounds an expectation whose event reached the cache
// before ExpectWrite was called.
const lateExpectationTTL = 5 * time.Second

// cached reports whether the cache of ref holds the object at
// resourceVersion.
func (r *Registry[K]) cached(ref Ref, namespace, name, resourceVersion string) bool {
	p, found, err := r.lookup(ref, namespace, name)
	return err == nil && found && p.ResourceVersion == resourceVersion
}

// ExpectDelete announces the owner's own delete of an object: its next
// delete event is not delivered (counted as own-write). Unused expectations
// expire after Options.ExpectationTTL.
func (r *Registry[K]) ExpectDelete(ref Ref, namespace, name string) {
	r.exp.expectDelete(expectationKey{ref, namespace, name}, r.clock.Now().Add(r.expectationTTL))
}

// tell enqueues the owners of ref with EventStateChanged; callers must not
// hold r.mu.
func (r *Registry[K]) tell(ref Ref, owners []K) {
	ev := Event{Ref: ref, Type: EventStateChanged}
	r.stats.received[eventTypeIndex(EventStateChanged)].Add(1)
	for _, k := range owners {
		r.enqueue(k, ev)
	}
	r.stats.delivered.Add(uint64(len(owners)))
}

// checkInvariants verifies the bookkeeping that the concurrency tests rely
// on: every tracked ref has a live (or failed, awaiting re-Track) entry that
// lists the owner, and no entry hands out a stopped informer.
func (r *Registry[K]) checkInvariants() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for owner, refs := range r.owners {
		if len(refs) == 0 {
			return fmt.Errorf("owner %v has an empty ref set", owner)
		}
		for ref := range refs {
			e := r.entries[ref]
			if e == nil {
				return fmt.Errorf("owner %v tracks %s but no entry exists", owner, ref)
			}
			if _, ok := e.owners[owner]; !ok {
				return fmt.Errorf("entry %s does not list its owner %v", ref, owner)
			}
		}
	}
	for ref, e := range r.entries {
		for owner := range e.owners {
			if _, ok := r.owners[owner][ref]; !ok {
				return fmt.Errorf("entry %s lists owner %v that does not track it", ref, owner)
			}
		}
		if len(e.owners) > 0 && !e.idleSince.IsZero() {
			return fmt.Errorf("entry %s has owners but is lingering", ref)
		}
		if e.stopped.Load() && !e.state.failed() {
			return fmt.Errorf("entry %s is in state %s but its informer was stopped", ref, e.state)
		}
		if !e.state.failed() && r.runCtx != nil && !r.closed && (e.cancel == nil || e.informer.IsStopped()) {
			return fmt.Errorf("entry %s is in state %s but its informer is not running", ref, e.state)
		}
	}
	return nil
}

// owned copies a set of owner keys.
func owned[K comparable](m map[K]struct{}) map[K]struct{} {
	out := make(map[K]struct{}, len(m))
	maps.Copy(out, m)
	return out
}

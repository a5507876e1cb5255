// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

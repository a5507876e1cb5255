// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/cachecharge"
	"github.com/vidra-operator/vidra/internal/config"
	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/health"
	"github.com/vidra-operator/vidra/internal/shard"
	"github.com/vidra-operator/vidra/internal/sourcewatch"
	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
	informers "github.com/vidra-operator/vidra/pkg/generated/informers/externalversions/infrahub/v1alpha1"
	listers "github.com/vidra-operator/vidra/pkg/generated/listers/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
	"github.com/vidra-operator/vidra/pkg/watchregistry/promcollector"
)

// Clients are the API clients of the cluster Vidra runs in.
type Clients struct {
	Kube    kubernetes.Interface
	Vidra   versioned.Interface
	Dynamic dynamic.Interface
	// Config is the operator's client configuration; impersonating clients
	// for serviceAccountName are derived from it.
	Config *rest.Config
	// Metadata and Discovery, when set, replace the metadata and discovery
	// clients otherwise built from Config and Kube: the fake clientsets
	// offer neither, and tests that reconcile without an API server pass
	// fakes. Production leaves them nil.
	Metadata  metadata.Interface
	Discovery discovery.DiscoveryInterface
}

// Options tune a Controller. Zero values take the documented defaults.
type Options struct {
	// Namespace is the operator's own namespace.
	Namespace string
	// DefaultServiceAccount is impersonated for resources that name none.
	DefaultServiceAccount string
	// TrustedNamespaces are the namespaces whose resources may act with the
	// operator's own identity when they name no ServiceAccount; nil means
	// Namespace alone, AllNamespaces every namespace. Resources elsewhere
	// that name none apply nothing (ServiceAccountRequired).
	TrustedNamespaces []string
	// RemoteGuard limits where remote destinations may lead.
	RemoteGuard destination.Guard
	// Config returns the settings in force; nil means config.Default.
	Config func() *config.Config
	// Recorder records Events on VidraResources; nil discards them.
	Recorder record.EventRecorder
	// Registerer receives the controller's and the watch registry's metrics.
	Registerer prometheus.Registerer
	// QueueMetrics, if set, receives the work queue's depth, latency and
	// retries (client-go's workqueue metrics).
	QueueMetrics workqueue.MetricsProvider
	// Clock is injectable for tests.
	Clock clock.WithTicker
	// Linger is how long an informer nobody needs keeps running; zero means
	// watchregistry.DefaultLinger.
	Linger time.Duration
	// Informers bounds the informers of the managed objects: per namespace
	// of the resources that need them (PerTenant), per destination
	// cluster and in all. A zero field means its default
	// (DefaultInformerBudget).
	Informers watchregistry.InformerBudget
	// OnReconcile, if set, is called after every reconcile with its key,
	// trigger and result ("success", "error", "conflict"); tests count
	// reconciles with it.
	OnReconcile func(key cache.ObjectName, trigger Trigger, result string)
	// AllowCrossNamespaceDependencies lets spec.dependsOn name resources of
	// other namespaces; off, a tenant cannot even learn whether a resource
	// of another namespace exists or is Ready.
	AllowCrossNamespaceDependencies bool
	// MaxRetries caps the rate-limited retries of one failing key; after
	// that it waits for the next interval or event. Default 20.
	MaxRetries int
	// ReconcileTimeout bounds the work of one reconcile on its destination:
	// past it the reconcile stops, keeps and reports what it did, and is
	// retried with backoff. It bounds how long a free worker can be out of
	// reach of other namespaces. Zero means DefaultReconcileTimeout; a
	// negative value, no limit.
	ReconcileTimeout time.Duration
	// PartialView tells that the VidraResource informer holds only some
	// resources (one namespace, a shard selector): an owner it does not
	// hold may then exist, and objects left by an owner that seems gone are
	// not adopted.
	PartialView bool
	// Shard, when set, is this replica's share of the VidraResources of a
	// sharded operator: it reconciles only the keys Shard lets it enter,
	// and ShardChanged must be called when the share changes.
	Shard Shard
	// CacheBudgets are the byte budgets of the namespaces' cached objects
	// (see internal/cachecharge); nil means cachecharge.NewBudgets(0).
	CacheBudgets *cachecharge.Budgets
}

// Shard decides which VidraResources this replica reconciles.
type Shard interface {
	// Enter reports whether this replica reconciles key now; when it does,
	// the reconcile runs with the context returned, which ends when the
	// replica must stop at once, and leave is called once it is over.
	Enter(ctx context.Context, key cache.ObjectName) (_ context.Context, leave func(), ok bool)
	// Owns reports whether key is this replica's now.
	Owns(key cache.ObjectName) bool
}

// Controller reconciles VidraResources.
type Controller struct {
	clients Clients
	// status sends the status writes, shaped by updateStatus: the generated
	// clientset's REST client. It is a field so that tests answer those
	// requests themselves: the generated fake clientset has no REST client.
	status rest.Interface
	lister listers.VidraResourceLister
	// indexer is the lister's store, indexed by dependency (dependsOnIndex).
	indexer cache.Indexer
	synced  cache.InformerSynced
	queue   workqueue.TypedRateLimitingInterface[cache.ObjectName]
	// limiter is the queue's rate limiter, asked directly for a retry's
	// delay (see handleErr).
	limiter workqueue.TypedRateLimiter[cache.ObjectName]
	// fair is the queue's storage, told when a key's reconcile is over.
	fair     *fairQueue
	registry *watchregistry.Registry[cache.ObjectName]
	dests    *destination.Resolver
	engine   *apply.Engine
	// sources wakes resources when an object of their spec.manifestFrom
	// changes.
	sources  *sourcewatch.Watcher
	recorder record.EventRecorder
	metrics  *Metrics
	clock    clock.WithTicker
	config   func() *config.Config
	opts     Options
	// health paces the reconciles woken by changes of health alone.
	health *healthPacer

	mu       sync.Mutex
	triggers map[cache.ObjectName]map[Trigger]pendingTrigger
	// lastTrigger is the trigger of each key's latest reconcile: a key
	// queued again while it was being reconciled, by a cause that reconcile
	// took, runs again for that cause.
	lastTrigger map[cache.ObjectName]Trigger
	// putOffKeys are the keys put off once (putOff), whose next reconcile
	// for a rebalance or a start runs.
	putOffKeys map[cache.ObjectName]struct{}

	// held is the share ShardChanged last took on, by bucket, and missed
	// the keys of that share whose reconciles were dropped since because
	// the share was changing, each with its most significant trigger: a
	// change that keeps the informers running reconciles these of the
	// keys it keeps, not every one (see ShardChanged).
	held   [shard.Buckets]bool
	missed map[cache.ObjectName]Trigger

	// share is this replica's buckets, nil until it has a share, and
	// selectors the watch registry's label selectors: one per share taken
	// on since the last that dropped a bucket. Only ShardChanged uses them,
	// from the shard member's goroutine.
	share     []int
	selectors []string

	// uids are the UIDs of the resources the informer holds, which tell
	// whether an object's owner still exists.
	uids *resourceUIDs
	// budgets are the namespaces' cache budgets.
	budgets *cachecharge.Budgets
}

// DefaultInformerBudget is the default of Options.Informers. An informer
// of a kind costs some 100 KiB and ten goroutines however few objects it
// caches (a thousand kinds of a tenant's server took 116 MiB and 10,000
// goroutines). A namespace's resources rarely declare more than a few dozen
// kinds (Argo CD's whole install, some 15): 64 is room for four times that.
// A cluster with every built-in kind and some 190 CRDs fits in 256. 1,024
// informers take some 120 MiB at most, half the install's memory limit, and
// serve sixteen namespaces at their bound, or four clusters at theirs.
var DefaultInformerBudget = watchregistry.InformerBudget{PerTenant: 64, PerCluster: 256, Total: 1024}

// DefaultReconcileTimeout is the default of Options.ReconcileTimeout. A
// reconcile of thousands of objects on a cluster that answers in
// milliseconds takes seconds; a minute is room for that, for a CRD to be
// served (10 s) and an object to be recreated (30 s), and yet another
// namespace's resource waits for a worker a minute at most.
const DefaultReconcileTimeout = time.Minute

// maxShareSelectors caps the informers a replica runs per resource for the
// buckets it gained one rebalance at a time; past it, a rebalance lists the
// whole share again, under one selector.
const maxShareSelectors = 4

// NewController wires the VidraResource informer, the work queue and the watch
// registry. Start the informer factory, then Run.
func NewController(ctx context.Context, clients Clients, vrInformer informers.VidraResourceInformer, opts Options) (*Controller, error) {
	logger := klog.FromContext(ctx)
	if opts.Config == nil {
		def := config.Default()
		opts.Config = func() *config.Config { return def }
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Recorder == nil {
		opts.Recorder = &record.FakeRecorder{}
	}
	if opts.ReconcileTimeout == 0 {
		opts.ReconcileTimeout = DefaultReconcileTimeout
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 20
	}
	if opts.CacheBudgets == nil {
		opts.CacheBudgets = cachecharge.NewBudgets(0)
	}
	opts.Informers.PerTenant = cmp.Or(opts.Informers.PerTenant, DefaultInformerBudget.PerTenant)
	opts.Informers.PerCluster = cmp.Or(opts.Informers.PerCluster, DefaultInformerBudget.PerCluster)
	opts.Informers.Total = cmp.Or(opts.Informers.Total, DefaultInformerBudget.Total)
	fair := newFairQueue()
	queue, limiter := newQueue(fair, opts)
	c := &Controller{
		queue:       queue,
		limiter:     limiter,
		clients:     clients,
		status:      clients.Vidra.InfrahubV1alpha1().RESTClient(),
		lister:      vrInformer.Lister(),
		indexer:     vrInformer.Informer().GetIndexer(),
		synced:      vrInformer.Informer().HasSynced,
		fair:        fair,
		recorder:    opts.Recorder,
		metrics:     NewMetrics(opts.Registerer),
		health:      newHealthPacer(),
		clock:       opts.Clock,
		config:      opts.Config,
		opts:        opts,
		triggers:    map[cache.ObjectName]map[Trigger]pendingTrigger{},
		lastTrigger: map[cache.ObjectName]Trigger{},
		putOffKeys:  map[cache.ObjectName]struct{}{},
		missed:      map[cache.ObjectName]Trigger{},
		uids:        newResourceUIDs(),
		budgets:     opts.CacheBudgets,
	}

	reg, err := watchregistry.New(watchregistry.Options[cache.ObjectName]{
		// Objects labelled by someone else without an owner are not even
		// listed; Keep drops those whose owner is not a VidraResource.
		LabelSelector: objectSelector(nil),
		Keep: func(u *unstructured.Unstructured) bool {
			_, ok := apply.MarkedOwner(c.lister, u)
			return ok
		},
		// Only what an owner declares is held in full, charged to its
		// namespace; the rest is a stub.
		Charge: c.charge,
		Linger: opts.Linger,
		// A namespace is charged for the kinds its resources need
		// watched, shared with other namespaces or not.
		Informers: opts.Informers,
		Tenant:    func(key cache.ObjectName) string { return key.Namespace },
		Map:       c.ownerOf,
		Enqueue:   c.wake,
		// Status-only updates wake the owner only when the object's health
		// changes: a Deployment's status churns without that.
		WakeDigest: health.Digest,
		Transform: func(u *unstructured.Unstructured) error {
			apply.TrimForCache(u, c.config().OverrideManagers)
			return nil
		},
		FieldManager: v1alpha1.FieldManager,
		Clock:        opts.Clock,
		Logger:       logger.WithName("watchregistry"),
	})
	if err != nil {
		return nil, fmt.Errorf("create watch registry: %w", err)
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(promcollector.New(reg, "vidra_watchregistry")); err != nil {
			return nil, fmt.Errorf("register watch registry metrics: %w", err)
		}
	}
	c.registry = reg
	enqueue := func(key cache.ObjectName) { c.enqueue(key, TriggerEvent) }
	c.dests, err = destination.New(destination.Options{
		Kube: clients.Kube, Dynamic: clients.Dynamic, Config: clients.Config, Metadata: clients.Metadata, Discovery: clients.Discovery,
		Registry: reg, Clock: opts.Clock,
		Namespace: opts.Namespace, DefaultServiceAccount: opts.DefaultServiceAccount, TrustedNamespaces: opts.TrustedNamespaces,
		Guard: opts.RemoteGuard, Enqueue: enqueue,
	})
	if err != nil {
		return nil, err
	}
	// The objects of spec.manifestFrom are watched by the operator's own
	// identity, metadata only, and read by each resource's.
	c.sources = sourcewatch.New(c.dests.Local().Meta, enqueue)
	c.engine = apply.New(apply.Options{
		Registry: reg, Owners: c.lister, Vidra: clients.Vidra, Recorder: opts.Recorder, Enqueue: enqueue,
		Home: c.dests.Home, Sources: c.sources,
		Registerer: opts.Registerer, Clock: opts.Clock,
		Resources: func(uid types.UID) (exists, known bool) {
			// Reconciles start once the informer has listed: the set
			// holds every resource the informer may.
			return c.uids.has(uid), !opts.PartialView
		},
	})

	if err := vrInformer.Informer().AddIndexers(cache.Indexers{dependsOnIndex: indexDependencies}); err != nil {
		return nil, fmt.Errorf("index VidraResources by dependency: %w", err)
	}
	if err := vrInformer.Informer().SetTransform(trimCachedResource); err != nil {
		return nil, fmt.Errorf("trim cached VidraResources: %w", err)
	}
	_, err = vrInformer.Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			c.uids.add(obj)
			t := TriggerEvent
			if isInInitialList {
				t = TriggerStartup
			}
			c.enqueueObject(obj, t)
			if vr, ok := obj.(*v1alpha1.VidraResource); ok {
				c.wakeDependents(vr)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			c.uids.update(oldObj, newObj)
			old, cur := oldObj.(*v1alpha1.VidraResource), newObj.(*v1alpha1.VidraResource)
			if t, ok := updateTrigger(old, cur); ok {
				c.enqueueObject(newObj, t)
			}
			// Its own status write is what makes a resource Ready: that
			// wakes its dependents, not itself. So does a change of why it
			// is not Ready, which their messages quote.
			if isReady(old) != isReady(cur) || !isReady(cur) && readiness(old) != readiness(cur) {
				c.wakeDependents(cur)
			}
		},
		DeleteFunc: func(obj any) {
			c.uids.remove(obj)
			c.enqueueObject(obj, TriggerEvent)
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if vr, ok := obj.(*v1alpha1.VidraResource); ok {
				c.wakeDependents(vr)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch VidraResources: %w", err)
	}
	return c, nil
}

// updateTrigger decides whether an update of a VidraResource needs a
// reconcile. Status writes (Vidra's own above all) and metadata-only changes
// such as the finalizer Vidra adds do not: reacting to them would loop.
func updateTrigger(old, cur *v1alpha1.VidraResource) (Trigger, bool) {
	switch {
	case old.Annotations[v1alpha1.RequestedAtAnnotation] != cur.Annotations[v1alpha1.RequestedAtAnnotation]:
		return TriggerRequested, true
	case old.Generation != cur.Generation,
		!old.DeletionTimestamp.Equal(cur.DeletionTimestamp),
		cur.DeletionTimestamp != nil && len(old.Finalizers) != len(cur.Finalizers),
		old.UID != cur.UID:
		return TriggerEvent, true
	}
	return "", false
}

// Run starts the watch registry and workers, blocks until ctx ends, then
// shuts the queue down and waits for the workers and the registry.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)

	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.queue.ShutDown()
	wg.Go(func() { c.registry.Run(ctx) })
	// Secret informers of remote destinations start on demand, under ctx.
	wg.Go(func() { c.dests.Run(ctx) })
	wg.Go(func() { c.sources.Run(ctx) })

	logger.Info("Waiting for informer caches to sync")
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced) {
		return errors.New("VidraResource informer did not sync")
	}
	logger.Info("Starting workers", "count", workers)
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	<-ctx.Done()
	logger.Info("Shutting down workers")
	return nil
}

// HasSynced reports whether the VidraResource cache is synced; /readyz uses it.
func (c *Controller) HasSynced() bool { return c.synced() }

// Registry exposes the watch registry, for stats and tests.
func (c *Controller) Registry() *watchregistry.Registry[cache.ObjectName] { return c.registry }

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	got := c.clock.Now()
	defer c.queue.Done(key)
	if c.opts.Shard != nil {
		var leave func()
		var ok bool
		ctx, leave, ok = c.opts.Shard.Enter(ctx, key)
		if !ok {
			// Another replica's, or the share is changing: ShardChanged
			// queues this replica's keys once it has settled.
			c.fair.finished(key)
			c.queue.Forget(key)
			c.miss(key, c.dropTriggers(key))
			return true
		}
		defer leave()
	}
	// Before Done: a key re-added meanwhile is pushed back on Done, and its
	// namespace must not count this reconcile as still running then.
	defer c.fair.finished(key)

	trigger := c.takeTrigger(key, got)
	ctx = reconcileContext(ctx, key, trigger)
	c.mu.Lock()
	_, putOffOnce := c.putOffKeys[key]
	delete(c.putOffKeys, key)
	c.mu.Unlock()
	if (trigger == TriggerRebalance || trigger == TriggerStartup) && !putOffOnce && c.putOff(ctx, key, trigger) {
		return true
	}
	res, err := c.sync(ctx, key)
	c.recordReconcile(ctx, key, trigger, c.clock.Since(got), res, err)
	c.handleErr(ctx, key, res, err)
	return true
}

// loggedErr is err as a log line says it: a reconcile's error joins those
// of up to 1,000 objects, each quoting what a destination answered, and
// the status already holds them.
func loggedErr(err error) error {
	if msg := err.Error(); len(msg) > wording.MaxMessage {
		return errors.New(wording.Message(msg))
	}
	return err
}

// reconcileContext carries the reconcile's logger, and for a reconcile a
// person asked for, the request that a remote destination prove it answers.
func reconcileContext(ctx context.Context, key cache.ObjectName, trigger Trigger) context.Context {
	logger := klog.FromContext(ctx).WithValues("vidraresource", key.String(), "trigger", trigger)
	ctx = klog.NewContext(ctx, logger)
	if trigger == TriggerRequested {
		ctx = destination.WithProbe(ctx)
	}
	return ctx
}

// recordReconcile counts a finished reconcile by result and trigger.
func (c *Controller) recordReconcile(ctx context.Context, key cache.ObjectName, trigger Trigger, elapsed time.Duration, res syncResult, err error) {
	result := "success"
	switch {
	case err == nil && res.conflict:
		result = "conflict"
	case err != nil && apierrors.IsConflict(err):
		result = "conflict"
	case err != nil:
		result = "error"
	}
	c.metrics.Reconciles.WithLabelValues(result, string(trigger)).Inc()
	c.metrics.ReconcileSeconds.WithLabelValues(result).Observe(elapsed.Seconds())
	klog.FromContext(ctx).V(4).Info("Reconcile finished", "duration", elapsed, "result", result)
	if c.opts.OnReconcile != nil {
		c.opts.OnReconcile(key, trigger, result)
	}
}

// handleErr schedules what comes after a reconcile. Every retry goes through
// the rate limiter, 409s included: a conflict means the cache was behind a
// write, and the backoff's first step (200ms) is time for it to catch up;
// requeueing at once would let one resource that keeps conflicting take a
// worker from everyone else.
func (c *Controller) handleErr(ctx context.Context, key cache.ObjectName, res syncResult, err error) {
	logger := klog.FromContext(ctx)
	switch {
	case err == nil:
		c.queue.Forget(key)
		if res.requeueAfter > 0 {
			c.enqueueAfter(key, res.requeueTrigger, res.requeueAfter)
		}
		return
	case apierrors.IsConflict(err):
		logger.V(4).Info("Reconcile hit a conflict, retrying with backoff", "err", loggedErr(err))
	case c.queue.NumRequeues(key) >= c.opts.MaxRetries && res.requeueAfter > 0:
		// The periodic re-check brings the resource back; until then the
		// failure is in its status for a person to see.
		utilruntime.HandleErrorWithContext(ctx, loggedErr(err), "Giving up retries of VidraResource until its next interval", "retries", c.queue.NumRequeues(key), "interval", res.requeueAfter)
		c.queue.Forget(key)
		c.enqueueAfter(key, res.requeueTrigger, res.requeueAfter)
		return
	default:
		// Without an interval to bring it back (a deletion, or interval 0)
		// a dropped key would wait for someone to edit the resource: keep
		// retrying, the backoff capped at 5 minutes.
		logger.V(2).Info("Reconcile failed, retrying with backoff", "err", loggedErr(err), "retries", c.queue.NumRequeues(key))
	}
	// What AddRateLimited does, with the retry recorded as due when the
	// queue hands the key out again: recorded as due now, a reconcile woken
	// by something else meanwhile would take it, and the late re-add would
	// then be counted as an event.
	d := c.limiter.When(key)
	c.addTrigger(key, TriggerRetry, c.clock.Now().Add(d))
	c.queue.AddAfter(key, d)
}

// wake queues the owner of a managed object for a watch event of it: at
// once for a change of the object, paced for a change of its health alone
// (healthChanged).
func (c *Controller) wake(key cache.ObjectName, ev watchregistry.Event) {
	switch ev.Type {
	case watchregistry.EventInitialList:
		// A new informer's first list is no change anyone made: after a
		// restart it is part of starting up.
		c.enqueue(key, TriggerStartup)
	case watchregistry.EventDigestChanged:
		c.healthChanged(key, ev)
	default:
		c.enqueue(key, TriggerEvent)
	}
}

func (c *Controller) enqueueObject(obj any, t Trigger) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	key, err := cache.ObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.enqueue(key, t)
}

func (c *Controller) enqueue(key cache.ObjectName, t Trigger) {
	if c.opts.Shard != nil && !c.opts.Shard.Owns(key) {
		c.miss(key, t)
		return
	}
	c.addTrigger(key, t, c.clock.Now())
	c.queue.Add(key)
}

func (c *Controller) enqueueAfter(key cache.ObjectName, t Trigger, d time.Duration) {
	if c.opts.Shard != nil && !c.opts.Shard.Owns(key) {
		// Missed, it is reconciled when the share has settled: sooner
		// than asked, which a level-triggered reconcile allows.
		c.miss(key, t)
		return
	}
	d = min(d, maxQueueDelay)
	c.addTrigger(key, t, c.clock.Now().Add(d))
	c.queue.AddAfter(key, d)
}

// maxQueueDelay bounds how long a key waits in the queue. The queue keeps a
// waiting key until it is due, even once its resource is gone, and
// spec.interval and spec.timeout have no upper bound: a tenant creating and
// deleting resources of an interval of 2,000,000h would leave entries for
// centuries. A resource whose interval or health wait is longer is looked
// at again daily, which a level-triggered reconcile allows.
const maxQueueDelay = 24 * time.Hour

// dropTriggers forgets the recorded causes of a key this replica does not
// reconcile, and returns the most significant of them (TriggerEvent when
// none was recorded).
func (c *Controller) dropTriggers(key cache.ObjectName) Trigger {
	c.mu.Lock()
	defer c.mu.Unlock()
	picked := TriggerEvent
	for _, t := range triggerOrder {
		if _, ok := c.triggers[key][t]; ok {
			picked = t
			break
		}
	}
	delete(c.triggers, key)
	delete(c.lastTrigger, key)
	delete(c.putOffKeys, key)
	return picked
}

// miss records a reconcile of key dropped because this replica did not
// own it: when key was in the share last taken on, the share is changing
// (or this replica lost key), and ShardChanged reconciles it should this
// replica keep it.
func (c *Controller) miss(key cache.ObjectName, t Trigger) {
	c.mu.Lock()
	if !c.held[shard.Bucket(key)] {
		c.mu.Unlock()
		return
	}
	if prev, ok := c.missed[key]; !ok || significance(t) < significance(prev) {
		c.missed[key] = t
	}
	c.mu.Unlock()
	// The share may have settled since Owns answered, and ShardChanged
	// taken the missed keys before this one was added: queued here
	// then. Queued twice otherwise, which the queue folds into one.
	if c.opts.Shard.Owns(key) {
		c.addTrigger(key, t, c.clock.Now())
		c.queue.Add(key)
	}
}

// significance orders triggers as triggerOrder does: lower is more
// significant.
func significance(t Trigger) int {
	if i := slices.Index(triggerOrder, t); i >= 0 {
		return i
	}
	return len(triggerOrder)
}

// ShardChanged takes on a new share of the VidraResources (see
// Options.Shard): buckets are this replica's. The watch registry's
// informers then select the objects of those buckets only: a replica that
// only gained buckets keeps its informers and adds one per resource for the
// objects of the buckets gained, so that it lists only those (the handoff
// after a replica died); one that lost any restarts them under one
// selector, and lists its whole share again. The keys this replica lost are
// forgotten, with their informers' references. Those it gained are
// reconciled. Of those it kept, all are reconciled when the informers
// restarted, since what changed while they listed again went unseen; when
// they kept running, only the keys whose reconciles were dropped while
// the share changed (miss): every other change of their objects was seen.
func (c *Controller) ShardChanged(ctx context.Context, buckets []int) {
	logger := klog.FromContext(ctx)
	vrs, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	selectors, restarted := c.shareSelectors(buckets)
	c.mu.Lock()
	missed := c.missed
	c.missed = map[cache.ObjectName]Trigger{}
	c.held = [shard.Buckets]bool{}
	for _, b := range buckets {
		c.held[b] = true
	}
	c.mu.Unlock()
	// The keys this replica gains first: nobody serves them now. Their
	// first reconciles wait for the informers' lists of the new buckets
	// (they start once this returns: Enter waits for it, so none reads an
	// informer of the old scope, which would call the gained objects
	// absent); the keys kept come after them.
	var kept []cache.ObjectName
	listed := make(map[cache.ObjectName]bool, len(vrs))
	for _, vr := range vrs {
		key := cache.MetaObjectToName(vr)
		listed[key] = true
		switch {
		case !c.opts.Shard.Owns(key):
			c.forget(key)
		case len(c.registry.Refs(key)) > 0:
			kept = append(kept, key)
		default:
			c.enqueue(key, TriggerRebalance)
		}
	}
	if err := c.registry.SetLabelSelectors(selectors...); err != nil {
		logger.Error(err, "Selecting the objects of this replica's buckets failed")
	}
	// A resource deleted while the share changed, whose delete was missed,
	// lets go of its informers here.
	for key := range missed {
		if !listed[key] {
			c.forget(key)
		}
	}
	verify := 0
	for _, key := range kept {
		switch t, ok := missed[key]; {
		case restarted:
			c.enqueue(key, TriggerRebalance)
		case ok:
			c.enqueue(key, t)
		default:
			continue
		}
		verify++
	}
	logger.V(1).Info("Watching the objects of this replica's buckets", "buckets", len(buckets), "selectors", len(selectors),
		"informersRestarted", restarted, "keptKeys", len(kept), "keptKeysReconciled", verify)
}

// shareSelectors records buckets as this replica's share and returns the
// watch registry's selectors for it: those of the share before plus one
// for the buckets gained, when none was lost. restarted reports whether
// the informers of the share before stop: there was none, or the
// selectors were replaced rather than added to.
func (c *Controller) shareSelectors(buckets []int) (selectors []string, restarted bool) {
	prev, widens := c.share, c.widens()
	// nil is no share yet (or a fenced replica), as objectSelector takes it.
	c.share = slices.Clone(buckets)
	slices.Sort(c.share)
	var gained []int
	lost := false
	for _, b := range c.share {
		if _, found := slices.BinarySearch(prev, b); !found {
			gained = append(gained, b)
		}
	}
	for _, b := range prev {
		if _, found := slices.BinarySearch(c.share, b); !found {
			lost = true
		}
	}
	switch {
	case prev == nil || c.share == nil || lost || (len(gained) > 0 && !widens):
		c.selectors = []string{objectSelector(c.share)}
		restarted = true
	case len(gained) > 0:
		c.selectors = append(slices.Clip(c.selectors), objectSelector(gained))
	}
	return c.selectors, restarted
}

// ShardPrepare lists ahead the objects of buckets, those this replica
// would gain should the members that missed their Lease renewals be gone
// (see shard.Options.OnPrepare): the watch registry runs informers of
// their objects beside the scope's, neither read nor delivering events,
// and the selector ShardChanged adds for the buckets gained when the Lease
// expires is theirs, so the handoff does not wait for those lists. No
// buckets stops them. Runs on the shard member's goroutine, as
// ShardChanged does.
func (c *Controller) ShardPrepare(ctx context.Context, buckets []int) {
	sels := c.preparedSelectors(buckets)
	if err := c.registry.Prepare(sels...); err != nil {
		klog.FromContext(ctx).Error(err, "Listing ahead the objects of the buckets this replica would take over failed")
	}
}

// preparedSelectors returns the selector that shareSelectors would add
// should this replica gain buckets, none when it would not add one: when
// it has no share yet, or has as many selectors as it keeps, it would list
// its whole share again, and nothing prepared helps with that.
func (c *Controller) preparedSelectors(buckets []int) []string {
	if len(buckets) == 0 || !c.widens() {
		return nil
	}
	gained := slices.Clone(buckets)
	slices.Sort(gained)
	return []string{objectSelector(gained)}
}

// widens reports whether a gain of buckets, with none lost, would add a
// selector to the share's (see shareSelectors) rather than list the whole
// share again under one: there is a share, and fewer selectors than kept.
func (c *Controller) widens() bool {
	return len(c.share) > 0 && len(c.selectors) < maxShareSelectors
}

// putOff puts off, once, the reconcile of a key that a rebalance or a
// start (new informers' first lists) queued along with every other, when a
// look at the caches finds every object of its inventory there: the key goes
// to the back of the queue, behind the others, so that the resources with
// an object missing (deleted while no replica served them, or while the
// operator was down) are restored before thousands of intact ones are
// verified. The look sends no request; it reports whether the key was put
// off, queued again for trigger. processNextWorkItem does not ask again for
// a key put off.
func (c *Controller) putOff(ctx context.Context, key cache.ObjectName, trigger Trigger) bool {
	vr, err := c.lister.VidraResources(key.Namespace).Get(key.Name)
	// Only what a look at the local caches can settle: not a resource
	// being deleted, suspended, waiting for others, changed since its last
	// reconcile, or aimed at another cluster.
	if err != nil || vr.DeletionTimestamp != nil || vr.Spec.Suspend || len(vr.Spec.DependsOn) > 0 ||
		!slices.Contains(vr.Finalizers, v1alpha1.Finalizer) || vr.Status.ObservedGeneration != vr.Generation ||
		vr.Spec.Destination.KubeconfigSecretRef != nil || !destination.IsLocalServer(vr.Spec.Destination.Server) {
		return false
	}
	target, err := c.dests.Resolve(ctx, vr)
	if err != nil {
		return false
	}
	pass := c.engine.NewPass(vr, c.config().OverrideManagers)
	pass.Target = target
	if !c.engine.AllCached(ctx, pass) {
		return false
	}
	klog.FromContext(ctx).V(4).Info("Every object cached; verified after the resources missing one")
	c.mu.Lock()
	c.putOffKeys[key] = struct{}{}
	c.mu.Unlock()
	c.enqueue(key, trigger)
	return true
}

// OwnedKeys counts the VidraResources this replica owns: all of them
// without sharding.
func (c *Controller) OwnedKeys() int {
	vrs, err := c.lister.List(labels.Everything())
	if err != nil {
		return 0
	}
	if c.opts.Shard == nil {
		return len(vrs)
	}
	n := 0
	for _, vr := range vrs {
		if c.opts.Shard.Owns(cache.MetaObjectToName(vr)) {
			n++
		}
	}
	return n
}

// objectSelector selects the managed objects the watch registry caches:
// every object with Vidra's marks, or, for a replica of a sharded operator,
// those of its buckets (all 256: every object, as without sharding).
func objectSelector(buckets []int) string {
	sel := v1alpha1.ManagedByLabel + "=" + v1alpha1.ManagedByValue + "," + v1alpha1.OwnerUIDLabel
	if buckets == nil || len(buckets) == shard.Buckets {
		return sel
	}
	if len(buckets) == 0 {
		// No bucket is this replica's: select nothing.
		return sel + "," + v1alpha1.BucketLabel + " in (none)"
	}
	values := make([]string, len(buckets))
	for i, b := range buckets {
		values[i] = strconv.Itoa(b)
	}
	return sel + "," + v1alpha1.BucketLabel + " in (" + strings.Join(values, ",") + ")"
}

// pendingTrigger is a recorded cause of a queued key: when it was
// recorded, and when the queue hands the key out for it.
type pendingTrigger struct {
	added, due time.Time
}

// addTrigger records why key was queued. A trigger due later than an equal
// one already recorded is dropped: the queue, too, keeps the earliest.
func (c *Controller) addTrigger(key cache.ObjectName, t Trigger, due time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.triggers[key]
	if m == nil {
		m = map[Trigger]pendingTrigger{}
		c.triggers[key] = m
	}
	if prev, ok := m[t]; !ok || due.Before(prev.due) {
		m[t] = pendingTrigger{added: c.clock.Now(), due: due}
	}
}

// takeTrigger removes and returns the most significant trigger of a key
// the queue handed out at got. Causes recorded after got stay: the key was
// queued again for them while it was being handed out, and the queue runs
// it again. A run with no cause of its own is such a second run whose
// cause the first took: it counts under the first's trigger.
func (c *Controller) takeTrigger(key cache.ObjectName, got time.Time) Trigger {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.triggers[key]
	// A little slack: the delaying queue may hand out an item a hair before
	// the clock reads its due time.
	dueBy := got.Add(10 * time.Millisecond)
	var picked Trigger
	for _, t := range triggerOrder {
		if p, ok := m[t]; ok && !p.due.After(dueBy) && !p.added.After(got) {
			if picked == "" {
				picked = t
			}
			delete(m, t)
		}
	}
	if len(m) == 0 {
		delete(c.triggers, key)
	}
	if picked == "" {
		picked = c.lastTrigger[key]
	}
	if picked == "" {
		picked = TriggerEvent
	}
	c.lastTrigger[key] = picked
	return picked
}

// ownerOf maps a watch event of a managed object to the VidraResource named in
// its owned-by annotation, if that resource corrects drift on events.
func (c *Controller) ownerOf(ev watchregistry.Event) []cache.ObjectName {
	if ev.Object == nil {
		return nil
	}
	vr, ok := apply.MarkedOwner(c.lister, ev.Object)
	// Health changes wake the owner whether or not it corrects drift on
	// events: waiting for health never polls.
	if !ok || (!c.eventMode(vr) && ev.Type != watchregistry.EventDigestChanged) {
		return nil
	}
	key := cache.MetaObjectToName(vr)
	obj := apply.WatchedObject{GVR: ev.Ref.GVR, Namespace: ev.Object.GetNamespace(), Name: ev.Object.GetName()}
	if !c.engine.WakesFrom(key, vr.UID, ev.Ref.Cluster, obj) {
		return nil
	}
	return []cache.ObjectName{key}
}

func (c *Controller) eventMode(vr *v1alpha1.VidraResource) bool {
	if p := vr.Spec.Destination.ReconcileOnEvents; p != nil {
		return *p
	}
	return c.config().EventBased
}

// ConfigChanged acts on a new configuration at once:
//   - resources that now correct drift on events (eventBasedReconcile turned
//     on), and every resource when the hand-edit managers changed, are
//     re-checked now: while events were off, or under the old rules, their
//     objects may have drifted with nothing to wake them;
//   - otherwise, when the interval or jitter changed, every periodic
//     re-check is re-scheduled, so that a shorter interval applies now
//     rather than after the old, longer one.
func (c *Controller) ConfigChanged(old, cur *config.Config) {
	if old == nil {
		return
	}
	eventsOn := !old.EventBased && cur.EventBased
	managers := !slices.Equal(old.OverrideManagers, cur.OverrideManagers)
	reschedule := old.RequeueAfter != cur.RequeueAfter || old.Jitter != cur.Jitter
	if !eventsOn && !managers && !reschedule {
		return
	}
	vrs, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, vr := range vrs {
		key := cache.MetaObjectToName(vr)
		switch {
		case managers || (eventsOn && c.eventMode(vr)):
			c.enqueue(key, TriggerInterval)
		case reschedule:
			if d := c.interval(vr); d > 0 {
				c.enqueueAfter(key, TriggerInterval, d)
			}
		}
	}
}

// interval is the resource's periodic re-check with jitter; 0 means none.
func (c *Controller) interval(vr *v1alpha1.VidraResource) time.Duration {
	cfg := c.config()
	d := cfg.RequeueAfter
	if vr.Spec.Interval != nil {
		d = vr.Spec.Interval.Duration
	}
	// The CRD refuses shorter intervals; resources stored before it did, or
	// under a CRD without its validation, must not loop either.
	if d > 0 && d < config.MinInterval {
		d = config.MinInterval
	}
	return config.Jittered(d, cfg.Jitter, rand.Float64)
}

func (c *Controller) event(vr *v1alpha1.VidraResource, warning bool, reason, format string, args ...any) {
	t := corev1.EventTypeNormal
	if warning {
		t = corev1.EventTypeWarning
	}
	// One message: whatever its arguments quote (a remote server's
	// errors, a thousand names), an Event is a few KiB, and client-go's
	// correlator keys its cache of Events by their messages.
	c.recorder.Event(vr, t, reason, wording.Message(fmt.Sprintf(format, args...)))
}

// trimCachedResource keeps VidraResources small in the informer cache, whose
// size a tenant would otherwise set: Vidra never reads their managedFields,
// and reads a manifest only through the apply engine, which reads it again
// when it needs it (apply.StripManifest). Nothing writes a cached copy back
// (see apply.StripManifest).
func trimCachedResource(obj any) (any, error) {
	if vr, ok := obj.(*v1alpha1.VidraResource); ok {
		vr.ManagedFields = nil
		apply.StripManifest(vr)
	}
	return obj, nil
}

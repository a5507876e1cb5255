// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/events"
	"github.com/vidra-operator/vidra/internal/sourcewatch"
	"github.com/vidra-operator/vidra/internal/wakequeue"
	"github.com/vidra-operator/vidra/internal/wording"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
	informers "github.com/vidra-operator/vidra/pkg/generated/informers/externalversions/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
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
	// Recorder records Events on VidraResources; nil discards them.
	Recorder record.EventRecorder
	// Registerer receives the controller's metrics.
	Registerer prometheus.Registerer
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
	// Wakes is what wakes a resource, and the queue it wakes into: its
	// methods (enqueue, miss) and fields (queue, share, lister, clock,
	// config) are the controller's own.
	*Wakes
	clients Clients
	// status sends the status writes, shaped by updateStatus: the generated
	// clientset's REST client. It is a field so that tests answer those
	// requests themselves: the generated fake clientset has no REST client.
	status rest.Interface
	// indexer is the lister's store, indexed by dependency (dependsOnIndex).
	indexer  cache.Indexer
	synced   cache.InformerSynced
	registry *watchregistry.Registry[cache.ObjectName]
	dests    *destination.Resolver
	engine   *apply.Engine
	// sources wakes resources when an object of their spec.manifestFrom
	// changes.
	sources *sourcewatch.Watcher
	events  events.Recorder
	metrics *Metrics
	opts    Options
}

// DefaultInformerBudget is the default of PartsOptions.Informers. An informer
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

// NewController builds the controller of the VidraResources of vrInformer
// over its parts (NewParts, built over the same informer's lister). Start
// the informer factory, then Run.
func NewController(ctx context.Context, clients Clients, vrInformer informers.VidraResourceInformer, parts Parts, opts Options) (*Controller, error) {
	if opts.ReconcileTimeout == 0 {
		opts.ReconcileTimeout = DefaultReconcileTimeout
	}
	if opts.MaxRetries == 0 {
		opts.MaxRetries = 20
	}
	c := &Controller{
		Wakes:    parts.Wakes,
		registry: parts.Registry,
		dests:    parts.Resolver,
		sources:  parts.Sources,
		engine:   parts.Engine,
		clients:  clients,
		status:   clients.Vidra.InfrahubV1alpha1().RESTClient(),
		indexer:  vrInformer.Informer().GetIndexer(),
		synced:   vrInformer.Informer().HasSynced,
		events:   events.New(opts.Recorder),
		metrics:  NewMetrics(opts.Registerer),
		opts:     opts,
	}
	if err := c.watchResources(vrInformer); err != nil {
		return nil, err
	}
	return c, nil
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

// processNextWorkItem reconciles the next key, if this replica's; a key
// another replica owns, or one that comes while the share is changing, is
// left to ShardChanged, which queues this replica's keys once the share
// has settled.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	it, ok := c.queue.Get()
	if !ok {
		return false
	}
	defer c.queue.Done(it)
	ctx, leave, ours := c.share.enter(ctx, it.Key)
	if !ours {
		c.queue.Forget(it.Key)
		c.miss(it.Key, c.queue.Drop(it.Key))
		return true
	}
	defer leave()
	c.work(ctx, it)
	return true
}

// work syncs the key it, counts the reconcile under what woke it and
// schedules what comes next. A start's or a rebalance's reconcile of a
// resource whose objects are all cached is put off once, behind the
// others (putOff).
func (c *Controller) work(ctx context.Context, it wakequeue.Item) {
	trigger, putOffOnce := c.queue.Take(it)
	ctx = reconcileContext(ctx, it.Key, trigger)
	if (trigger == TriggerRebalance || trigger == TriggerStartup) && !putOffOnce && c.putOff(ctx, it.Key, trigger) {
		return
	}
	res, err := c.sync(ctx, it.Key)
	c.recordReconcile(ctx, it.Key, trigger, c.clock.Since(it.Got), res, err)
	c.handleErr(ctx, it.Key, res, err)
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
	c.queue.Retry(key)
}

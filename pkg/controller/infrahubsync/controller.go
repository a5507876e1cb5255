// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahubsync

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/internal/config"
	"github.com/vidra-operator/vidra/internal/events"
	"github.com/vidra-operator/vidra/internal/infrahub/webhook"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
	informers "github.com/vidra-operator/vidra/pkg/generated/informers/externalversions/infrahub/v1alpha1"
	listers "github.com/vidra-operator/vidra/pkg/generated/listers/infrahub/v1alpha1"
)

// Trigger is what woke a pass, recorded beside the key.
type Trigger string

// Triggers, in order of precedence when several woke one pass.
const (
	TriggerRequested Trigger = "requested"
	TriggerEvent     Trigger = "event"
	// TriggerChild: a VidraResource of the sync was deleted by someone.
	TriggerChild    Trigger = "child"
	TriggerStartup  Trigger = "startup"
	TriggerRetry    Trigger = "retry"
	TriggerInterval Trigger = "interval"
)

// A webhook ranks below every trigger that asks for a whole pass: the
// artifacts it names are looked at then too.
var triggerOrder = []Trigger{TriggerRequested, TriggerEvent, TriggerChild, TriggerStartup, TriggerWebhook, TriggerRetry, TriggerInterval}

// The bounds of a pass's waits. A worker waits for each call: Infrahub's
// per-call timeout is set by the SourceFactory (see internal/operator);
// each Kubernetes call waits apiTimeout at most.
const (
	apiTimeout = 10 * time.Second
	// maxRetryDelay caps the backoff of a failing sync, so that a
	// recovered Infrahub is seen within seconds; a shorter interval caps it
	// lower.
	maxRetryDelay = 10 * time.Second
	minRetryDelay = 500 * time.Millisecond
	// maxJitter caps the spread of polls: at most 10 % of the interval.
	maxJitter = 0.1
)

// Options tune a Controller. Zero values take the documented defaults.
type Options struct {
	// Namespace is the operator's own namespace.
	Namespace string
	// TrustedNamespaces are the namespaces whose syncs may act with the
	// operator's identity ("*" all); nil means Namespace alone. A sync
	// elsewhere needs spec.template.serviceAccountName.
	TrustedNamespaces []string
	// DefaultServiceAccount stands for a template that names none, as for
	// VidraResources.
	DefaultServiceAccount string
	// AllowHTTP lets a sync name a plain http:// Infrahub
	// (--allow-http-destinations); the SourceFactory must allow it too.
	AllowHTTP bool
	// Config returns the settings in force; nil means config.Default.
	Config func() *config.Config
	// Recorder records Events on InfrahubSyncs; nil discards them.
	Recorder record.EventRecorder
	// Registerer receives the controller's metrics.
	Registerer prometheus.Registerer
	// Clock is injectable for tests.
	Clock clock.WithTicker
	// Owns, when set, tells whether this replica of a sharded operator
	// polls the sync of key; a replica that does not keeps its timer, so
	// that the sync is polled by whichever replica owns it next.
	Owns func(key cache.ObjectName) bool
	// OnPass, if set, is called after every pass with its key, trigger and
	// error; tests count passes with it.
	OnPass func(key cache.ObjectName, trigger Trigger, err error)
}

// Collaborators are what the controller uses and never builds.
type Collaborators struct {
	// Vidra writes generated VidraResources and sync status.
	Vidra versioned.Interface
	// Syncs and Resources are the informers of InfrahubSyncs and of
	// VidraResources (the operator's shared one).
	Syncs     informers.InfrahubSyncInformer
	Resources informers.VidraResourceInformer
	// Sources builds a sync's ArtifactSource.
	Sources SourceFactory
	// Secrets reads credentials, CA and webhook Secrets.
	Secrets SecretReader
	// Webhooks, if not nil, is told each sync's webhook key and artifacts
	// after every pass, for the receiver of Infrahub's webhooks.
	Webhooks *webhook.Registry
}

// Controller reconciles InfrahubSyncs.
type Controller struct {
	vidra     versioned.Interface
	syncs     listers.InfrahubSyncLister
	resources listers.VidraResourceLister
	synced    []cache.InformerSynced
	queue     workqueue.TypedRateLimitingInterface[cache.ObjectName]
	limiter   workqueue.TypedRateLimiter[cache.ObjectName]
	factory   SourceFactory
	secrets   SecretReader
	sources   *sources
	intact    *intactCache
	recorder  events.Recorder
	metrics   *Metrics
	clock     clock.WithTicker
	config    func() *config.Config
	opts      Options

	mu       sync.Mutex
	triggers map[cache.ObjectName]Trigger
	// deleting are the UIDs of children the sync itself deletes: their
	// deletion must not wake it for another query of Infrahub.
	deleting map[types.UID]struct{}
	// hints and lastWebhookPass are the webhooks' asks and rate limit,
	// per sync with a webhook.
	hints           map[cache.ObjectName]*hints
	lastWebhookPass map[cache.ObjectName]time.Time
	// lastPoll is when each sync with a webhook last asked for its whole
	// list (see pollDue).
	lastPoll map[cache.ObjectName]time.Time
	webhooks *webhook.Registry
}

// NewController registers the handlers on the informers; start them, then
// Run.
func NewController(ctx context.Context, col Collaborators, opts Options) (*Controller, error) {
	if opts.Config == nil {
		def := config.Default()
		opts.Config = func() *config.Config { return def }
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &Controller{
		vidra:     col.Vidra,
		syncs:     col.Syncs.Lister(),
		resources: col.Resources.Lister(),
		synced:    []cache.InformerSynced{col.Syncs.Informer().HasSynced, col.Resources.Informer().HasSynced},
		factory:   col.Sources,
		secrets:   col.Secrets,
		sources:   newSources(),
		intact:    newIntactCache(),
		recorder:  events.New(opts.Recorder),
		metrics:   NewMetrics(opts.Registerer),
		clock:     opts.Clock,
		config:    opts.Config,
		opts:      opts,
		triggers:  map[cache.ObjectName]Trigger{},
		deleting:  map[types.UID]struct{}{},

		hints:           map[cache.ObjectName]*hints{},
		lastWebhookPass: map[cache.ObjectName]time.Time{},
		lastPoll:        map[cache.ObjectName]time.Time{},
		webhooks:        col.Webhooks,
	}
	c.queue, c.limiter = c.newQueue()

	_, err := col.Syncs.Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			t := TriggerEvent
			if initial {
				t = TriggerStartup
			}
			c.enqueueObject(obj, t)
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, cur := oldObj.(*v1alpha1.InfrahubSync), newObj.(*v1alpha1.InfrahubSync)
			switch {
			case old.Annotations[v1alpha1.RequestedAtAnnotation] != cur.Annotations[v1alpha1.RequestedAtAnnotation]:
				c.enqueueObject(newObj, TriggerRequested)
			case old.Generation != cur.Generation, old.UID != cur.UID, !old.DeletionTimestamp.Equal(cur.DeletionTimestamp):
				// Status writes, Vidra's own above all, wake nothing.
				c.enqueueObject(newObj, TriggerEvent)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if s, ok := obj.(*v1alpha1.InfrahubSync); ok {
				// The garbage collector deletes its children; what Vidra
				// holds for it goes now.
				c.sources.drop(s.UID)
				c.forgetWebhook(cache.MetaObjectToName(s))
				c.enqueueObject(obj, TriggerEvent)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch InfrahubSyncs: %w", err)
	}
	// Only the deletion of a child wakes its sync, to recreate it: the
	// sync's own writes of children must not cost another query of
	// Infrahub, and a hand edit of a child is taken back at the next poll.
	_, err = col.Resources.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			vr, ok := obj.(*v1alpha1.VidraResource)
			if !ok {
				return
			}
			c.intact.forget(vr.UID)
			if c.deleted(vr.UID) {
				return
			}
			if ref := controllerRef(vr); ref != nil && ref.Kind == "InfrahubSync" && ref.APIVersion == v1alpha1.SchemeGroupVersion.String() {
				c.enqueue(cache.ObjectName{Namespace: vr.Namespace, Name: ref.Name}, TriggerChild)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch VidraResources of InfrahubSyncs: %w", err)
	}
	return c, nil
}

// expectDelete notes that the sync deletes the child uid itself.
func (c *Controller) expectDelete(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleting[uid] = struct{}{}
}

// deleted reports, once, whether the sync deleted the child uid itself.
func (c *Controller) deleted(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.deleting[uid]
	delete(c.deleting, uid)
	return ok
}

// retryLimiter is the queue's rate limiter: per-key exponential backoff
// from 500 ms, capped at the smaller of maxRetryDelay and the sync's
// interval, so that a failing Infrahub is asked less and less often and a
// recovered one is seen within seconds. The retries happen here, between
// passes, never inside one: a worker is not held by a failing Infrahub.
type retryLimiter struct {
	base  workqueue.TypedRateLimiter[cache.ObjectName]
	capOf func(key cache.ObjectName) time.Duration
}

func (l retryLimiter) When(key cache.ObjectName) time.Duration {
	return min(l.base.When(key), l.capOf(key))
}
func (l retryLimiter) Forget(key cache.ObjectName)          { l.base.Forget(key) }
func (l retryLimiter) NumRequeues(key cache.ObjectName) int { return l.base.NumRequeues(key) }

func (c *Controller) newQueue() (workqueue.TypedRateLimitingInterface[cache.ObjectName], workqueue.TypedRateLimiter[cache.ObjectName]) {
	limiter := retryLimiter{
		base: workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](minRetryDelay, maxRetryDelay),
		capOf: func(key cache.ObjectName) time.Duration {
			if s, err := c.syncs.InfrahubSyncs(key.Namespace).Get(key.Name); err == nil {
				return min(maxRetryDelay, c.interval(s))
			}
			return maxRetryDelay
		},
	}
	q := workqueue.NewTypedRateLimitingQueueWithConfig[cache.ObjectName](limiter,
		workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "infrahubsyncs", Clock: c.clock})
	return q, limiter
}

// interval is the sync's poll period: spec.interval, else the config's
// requeueSyncAfter (DefaultWebhookInterval for a sync with a webhook, whose
// poll is a safety net), never under config.MinInterval.
func (c *Controller) interval(s *v1alpha1.InfrahubSync) time.Duration {
	d := c.config().RequeueSyncAfter
	if s.Spec.Webhook != nil {
		d = v1alpha1.DefaultWebhookInterval
	}
	if s.Spec.Interval != nil {
		d = s.Spec.Interval.Duration
	}
	return max(d, config.MinInterval)
}

// jittered spreads d by up to the config's jitter, at most 10 %, so that
// syncs created together do not poll together.
func (c *Controller) jittered(d time.Duration) time.Duration {
	return config.Jittered(d, min(c.config().Jitter, maxJitter), rand.Float64)
}

func (c *Controller) enqueueObject(obj any, t Trigger) {
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.enqueue(key, t)
}

func (c *Controller) enqueue(key cache.ObjectName, t Trigger) {
	c.noteTrigger(key, t)
	c.queue.Add(key)
}

func (c *Controller) noteTrigger(key cache.ObjectName, t Trigger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.triggers[key]; !ok || rank(t) < rank(cur) {
		c.triggers[key] = t
	}
}

func rank(t Trigger) int {
	for i, o := range triggerOrder {
		if o == t {
			return i
		}
	}
	return len(triggerOrder)
}

func (c *Controller) takeTrigger(key cache.ObjectName) Trigger {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.triggers[key]
	delete(c.triggers, key)
	if !ok {
		return TriggerInterval
	}
	return t
}

// Run waits for the caches, starts workers and blocks until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithName("infrahubsync")
	ctx = klog.NewContext(ctx, logger)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return errors.New("InfrahubSync informers did not sync")
	}
	logger.Info("Starting InfrahubSync workers", "count", workers)
	for range workers {
		wg.Go(func() { wait.UntilWithContext(ctx, c.runWorker, time.Second) })
	}
	<-ctx.Done()
	return nil
}

// HasSynced reports whether the controller's caches are synced.
func (c *Controller) HasSynced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

func (c *Controller) runWorker(ctx context.Context) {
	for c.processNextWorkItem(ctx) {
	}
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	trigger := c.takeTrigger(key)
	c.metrics.Reconciles.WithLabelValues(string(trigger)).Inc()
	logger := klog.FromContext(ctx).WithValues("infrahubsync", key.String(), "trigger", trigger)
	ctx = klog.NewContext(ctx, logger)
	start := c.clock.Now()
	var res result
	var err error
	if c.opts.Owns != nil && !c.opts.Owns(key) {
		// Another replica's now; the timer stays here so that whichever
		// replica owns the sync next polls it.
		res = c.resultFor(key)
	} else {
		logger.V(4).Info("Pass started")
		res, err = c.sync(ctx, key, trigger)
		logger.V(4).Info("Pass finished", "duration", c.clock.Since(start), "err", err)
	}
	if c.opts.OnPass != nil {
		c.opts.OnPass(key, trigger, err)
	}
	c.handleErr(ctx, key, res, err)
	return true
}

// result tells processNextWorkItem when to come back.
type result struct {
	requeueAfter time.Duration
	// retryAfter is what Infrahub asked for with 429's Retry-After.
	retryAfter time.Duration
}

func (c *Controller) resultFor(key cache.ObjectName) result {
	s, err := c.syncs.InfrahubSyncs(key.Namespace).Get(key.Name)
	if err != nil || s.Spec.Suspend || s.DeletionTimestamp != nil {
		return result{}
	}
	return result{requeueAfter: c.jittered(c.interval(s))}
}

func (c *Controller) handleErr(ctx context.Context, key cache.ObjectName, res result, err error) {
	if err == nil {
		c.queue.Forget(key)
		if res.requeueAfter > 0 {
			c.queue.AddAfter(key, res.requeueAfter)
		}
		return
	}
	logger := klog.FromContext(ctx)
	if apierrors.IsConflict(err) {
		logger.V(4).Info("Pass hit a conflict, retrying with backoff", "err", err)
	} else {
		logger.V(2).Info("Pass failed, retrying with backoff", "err", err, "retries", c.queue.NumRequeues(key))
	}
	d := c.limiter.When(key)
	if res.retryAfter > d {
		// Infrahub said when: honoured, but never past the interval.
		d = min(res.retryAfter, max(res.requeueAfter, d))
	}
	c.noteTrigger(key, TriggerRetry)
	c.queue.AddAfter(key, d)
}

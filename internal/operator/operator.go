// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/internal/cachecharge"
	"github.com/vidra-operator/vidra/internal/config"
	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/infrahub/webhook"
	"github.com/vidra-operator/vidra/internal/shard"
	"github.com/vidra-operator/vidra/pkg/controller"
	"github.com/vidra-operator/vidra/pkg/controller/infrahubsync"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
	vidrascheme "github.com/vidra-operator/vidra/pkg/generated/clientset/versioned/scheme"
	"github.com/vidra-operator/vidra/pkg/generated/informers/externalversions"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// Defaults of Options, which the command's flags show too.
const (
	DefaultWorkers          = 8
	DefaultConfigMapName    = "vidra-config"
	DefaultReconcileTimeout = controller.DefaultReconcileTimeout
)

// Options configure an Operator. Zero values take the defaults.
type Options struct {
	// Config is the operator's client configuration (QPS and burst set).
	Config *rest.Config
	// Namespace is the operator's own namespace, home of the ConfigMap.
	Namespace string
	// ConfigMapName is the name of the vidra-config ConfigMap.
	ConfigMapName string
	// WatchNamespace limits the VidraResources reconciled to one namespace;
	// empty means all.
	WatchNamespace string
	// DefaultServiceAccount is impersonated for resources that name none.
	DefaultServiceAccount string
	// TrustedNamespaces may act with the operator's identity; nil means
	// Namespace alone, destination.AllNamespaces every namespace (see
	// controller.Options).
	TrustedNamespaces []string
	// AllowCrossNamespaceDependencies lets spec.dependsOn name resources
	// of other namespaces (see controller.Options).
	AllowCrossNamespaceDependencies bool
	// RemoteGuard limits where remote destinations may lead.
	RemoteGuard destination.Guard
	// NamespaceCacheBytes is the byte budget of the objects cached for the
	// resources of one namespace (see internal/cachecharge); zero means
	// cachecharge.DefaultNamespaceBytes.
	NamespaceCacheBytes int64
	// Workers is the number of reconciles run in parallel.
	Workers int
	// ReconcileTimeout bounds one reconcile (see controller.Options).
	ReconcileTimeout time.Duration
	// Linger is how long an informer nobody needs keeps running.
	Linger time.Duration
	// Informers bounds the informers of managed objects per namespace, per
	// cluster and in all; zero fields mean controller.DefaultInformerBudget.
	Informers watchregistry.InformerBudget
	// OnReconcile is passed to the controller (see controller.Options).
	OnReconcile func(key cache.ObjectName, trigger controller.Trigger, result string)
	// Metrics receives every metric of the operator and serves /metrics;
	// nil means a new registry.
	Metrics *prometheus.Registry
	// MetricsAddr and ProbeAddr are the listen addresses of /metrics and of
	// /healthz and /readyz; empty or "0" turns a server off.
	MetricsAddr, ProbeAddr string
	// MetricsSecure serves /metrics over TLS, to bearer tokens whose
	// identity may get it (see internal/securemetrics); the probes stay
	// plain, for the kubelet.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for MetricsSecure; empty
	// means a self-signed certificate generated at start.
	MetricsCertDir string
	// WebhookAddr is the listen address of the receiver of Infrahub's
	// webhooks (TLS); empty or "0" turns it off.
	WebhookAddr string
	// WebhookCertDir holds tls.crt and tls.key for the receiver; empty
	// means a self-signed certificate generated at start.
	WebhookCertDir string
	// LeaderElection makes only one of several replicas reconcile.
	LeaderElection LeaderElection
	// Sharding divides the VidraResources between replicas instead.
	Sharding Sharding
	// InfrahubSources, when set, replaces the factory of Infrahub clients
	// of InfrahubSyncs (tests count what each sync asks).
	InfrahubSources infrahubsync.SourceFactory
	// OnSyncPass is passed to the InfrahubSync controller.
	OnSyncPass func(key cache.ObjectName, trigger infrahubsync.Trigger, err error)
	// ShardSelector, a label selector, limits the VidraResources this
	// replica sees and reconciles: static sharding, by a label chosen by
	// hand.
	ShardSelector string
}

// Sharding configures the membership of a sharded operator's replicas (see
// internal/shard); zero durations take its defaults.
type Sharding struct {
	Enabled bool
	// Identity of this replica; default: host name and a random suffix.
	Identity                   string
	LeaseDuration, RenewPeriod time.Duration
}

// LeaderElection configures the coordination.k8s.io Lease that elects the
// replica that reconciles.
type LeaderElection struct {
	Enabled bool
	// Namespace and Name of the Lease; defaults: the operator's namespace
	// and "vidra-leader".
	Namespace, Name string
	// Identity of this replica; default: host name and a random suffix.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod as in client-go's
	// leaderelection; defaults 15s, 10s and 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Operator is Vidra, assembled and ready to run.
type Operator struct {
	Controller *controller.Controller
	// Syncs is the InfrahubSync controller; nil when the API server does
	// not serve InfrahubSyncs.
	Syncs  *infrahubsync.Controller
	Config *config.Watcher

	opts        Options
	kube        kubernetes.Interface
	factory     externalversions.SharedInformerFactory
	broadcaster record.EventBroadcaster
	leading     atomic.Bool
	member      *shard.Member
	// reviews sends the token reviews of MetricsSecure.
	reviews kubernetes.Interface
	// webhooks are the syncs' shared keys, written by the sync controller;
	// receiver reads them (nil when --webhook-bind-address is off).
	webhooks *webhook.Registry
	receiver *webhook.Receiver

	// served are the addresses the metrics and probe servers listen on,
	// once Run has started them: with port 0 in the options, the kernel's
	// choice, which a caller cannot know otherwise.
	servedMu                    sync.Mutex
	servedMetrics, servedProbes string
	servedWebhook               string
}

// ServedAddrs returns the addresses the metrics and probe servers listen
// on, empty until Run has started them (or for a server that is off).
func (o *Operator) ServedAddrs() (metrics, probes string) {
	o.servedMu.Lock()
	defer o.servedMu.Unlock()
	return o.servedMetrics, o.servedProbes
}

// New builds the clients, informers and controller.
func New(ctx context.Context, opts Options) (*Operator, error) {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.ConfigMapName == "" {
		opts.ConfigMapName = DefaultConfigMapName
	}
	if opts.MetricsCertDir != "" && !opts.MetricsSecure {
		return nil, errors.New("a metrics certificate directory is for the secure metrics endpoint only: add --metrics-secure, or drop --metrics-cert-dir")
	}
	// Built-in types speak protobuf, as in kube-controller-manager: Events,
	// Leases, ConfigMaps and Secrets then cost both sides less than JSON.
	kubeConfig := rest.CopyConfig(opts.Config)
	kubeConfig.ContentType = runtime.ContentTypeProtobuf
	kubeConfig.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	vidra, err := versioned.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("vidra client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}

	// A scheme of our own: Events must name VidraResources, and the global
	// client-go scheme is not ours to change.
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(vidrascheme.AddToScheme(scheme))
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "vidra"})

	if opts.Metrics == nil {
		opts.Metrics = prometheus.NewRegistry()
	}
	o := &Operator{opts: opts, broadcaster: broadcaster, kube: kube, webhooks: webhook.NewRegistry()}
	o.receiver = o.newWebhookReceiver(ctx)
	if opts.MetricsSecure {
		if o.reviews, err = newReviewClient(kubeConfig); err != nil {
			return nil, err
		}
	}
	if o.Config, err = config.NewWatcher(kube, opts.Namespace, opts.ConfigMapName, recorder); err != nil {
		return nil, err
	}

	if opts.Sharding.Enabled && opts.LeaderElection.Enabled {
		return nil, errors.New("sharding and leader election exclude each other: every replica of a sharded operator reconciles its share")
	}
	if _, err := labels.Parse(opts.ShardSelector); err != nil {
		return nil, fmt.Errorf("shard selector %q: %w", opts.ShardSelector, err)
	}
	var shardOpt controller.Shard
	if opts.Sharding.Enabled {
		o.member, err = shard.New(shard.Options{
			Client: kube, Namespace: opts.Namespace, Identity: opts.Sharding.Identity,
			LeaseDuration: opts.Sharding.LeaseDuration, RenewPeriod: opts.Sharding.RenewPeriod,
			Metrics: shard.NewMetrics(opts.Metrics),
		})
		if err != nil {
			return nil, err
		}
		shardOpt = o.member
	}
	o.factory = externalversions.NewSharedInformerFactoryWithOptions(vidra, 0, externalversions.WithNamespace(opts.WatchNamespace),
		externalversions.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = opts.ShardSelector }))
	clients := controller.Clients{Kube: kube, Vidra: vidra, Dynamic: dyn, Config: opts.Config}
	resources := o.factory.Infrahub().V1alpha1().VidraResources()
	fair := newFairRecorder(recorder, clock.RealClock{}, opts.Metrics)
	parts, err := controller.NewParts(ctx, clients, resources.Lister(), controller.PartsOptions{
		Namespace:             opts.Namespace,
		DefaultServiceAccount: opts.DefaultServiceAccount,
		TrustedNamespaces:     opts.TrustedNamespaces,
		RemoteGuard:           opts.RemoteGuard,
		Config:                o.Config.Current,
		Recorder:              fair,
		Registerer:            opts.Metrics,
		QueueMetrics:          newQueueMetrics(opts.Metrics),
		Linger:                opts.Linger,
		Informers:             opts.Informers,
		CacheBudgets:          cachecharge.NewBudgets(opts.NamespaceCacheBytes),
		PartialView:           opts.WatchNamespace != "" || opts.ShardSelector != "",
		Shard:                 shardOpt,
	})
	if err != nil {
		return nil, err
	}
	c, err := controller.NewController(ctx, clients, resources, parts, controller.Options{
		Recorder:                        fair,
		Registerer:                      opts.Metrics,
		AllowCrossNamespaceDependencies: opts.AllowCrossNamespaceDependencies,
		ReconcileTimeout:                opts.ReconcileTimeout,
		OnReconcile:                     opts.OnReconcile,
	})
	if err != nil {
		return nil, err
	}
	o.Controller = c
	// Told once the controller exists, before either runs.
	o.Config.Listen(c)
	if o.member != nil {
		o.member.Listen(c)
		opts.Metrics.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vidra_shard_keys", Help: "VidraResources this replica owns now.",
		}, func() float64 { return float64(c.OwnedKeys()) }))
	}

	served, err := infrahubSyncServed(kube)
	if err != nil {
		return nil, err
	}
	if served {
		if o.Syncs, err = o.newSyncController(ctx, kube, vidra, opts.Config, recorder, o.Config.Current); err != nil {
			return nil, err
		}
	} else {
		logSyncsOff(ctx)
	}
	o.registerStatusMetrics(opts.Metrics, served)
	return o, nil
}

// The client-side limit of the token reviews. 20 a second bounds what a
// flood of made-up tokens costs the API server, and is far more than a few
// scrapers ask for, whose decisions last a minute; the burst of 40 lets a
// few rounds of the reviews in flight (4 tokens of two requests each) pass
// without waiting.
const (
	reviewQPS   = 20
	reviewBurst = 40
)

// newReviewClient returns the client of MetricsSecure's token reviews: a
// client of its own, with a rate limit of its own, so that reviews of
// scrapers' tokens, however many a hostile client makes the endpoint ask
// for, never take the reconciles' share of the client-side limit.
func newReviewClient(base *rest.Config) (kubernetes.Interface, error) {
	config := rest.CopyConfig(base)
	config.QPS, config.Burst, config.RateLimiter = reviewQPS, reviewBurst, nil
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("token review client: %w", err)
	}
	return client, nil
}

// Run serves metrics and probes, starts the informers and, once this replica
// leads (or at once without leader election), the controller. It blocks
// until ctx ends and everything it started has stopped. Losing the lease
// while ctx is alive is an error: the process must exit so that two replicas
// never reconcile at once.
func (o *Operator) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	defer o.broadcaster.Shutdown()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer o.factory.Shutdown()

	le, err := o.leaderElector()
	if err != nil {
		return err
	}
	servers, err := o.serve(ctx, le)
	if err != nil {
		return err
	}
	defer servers.shutdown()

	wg.Go(func() { o.Config.Run(ctx) })
	if !cache.WaitForNamedCacheSyncWithContext(ctx, o.Config.HasSynced) {
		return fmt.Errorf("configuration ConfigMap %s/%s did not sync", o.opts.Namespace, o.opts.ConfigMapName)
	}
	o.factory.Start(ctx.Done())
	logger.Info("Starting Vidra", "namespace", o.opts.Namespace, "watchNamespace", o.opts.WatchNamespace,
		"trustedNamespaces", o.trusted(), "defaultServiceAccount", o.opts.DefaultServiceAccount,
		"workers", o.opts.Workers, "leaderElection", le != nil)
	if o.member != nil {
		// A member reconciles its share; Run of the member returns after
		// the controller's workers have stopped, and then leaves.
		o.leading.Store(true)
		memberCtx, stopMember := context.WithCancel(context.WithoutCancel(ctx))
		memberDone := make(chan error, 1)
		go func() { memberDone <- o.member.Run(memberCtx) }()
		err := o.runControllers(ctx)
		stopMember()
		return errors.Join(err, <-memberDone)
	}
	if le == nil {
		o.leading.Store(true)
		return o.runControllers(ctx)
	}

	// The elector calls back on a goroutine of its own; the controller runs
	// here instead, so that Run returns only after it has stopped.
	leaderCtxs := make(chan context.Context, 1)
	le.callbacks(func(leaderCtx context.Context) { leaderCtxs <- leaderCtx })
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		le.elector.Run(ctx)
	}()
	var runErr error
	select {
	case leaderCtx := <-leaderCtxs:
		o.leading.Store(true)
		logger.Info("Became the leader; reconciling", "identity", le.identity)
		runErr = o.runControllers(leaderCtx)
		o.leading.Store(false)
	case <-electorDone:
	}
	<-electorDone
	if ctx.Err() == nil {
		return errors.Join(errors.New("lost the leader election lease"), runErr)
	}
	return runErr
}

// runControllers runs the VidraResource and the InfrahubSync controllers
// until ctx ends, and waits for both. They are elected (or sharded)
// together: the replica that leads runs both; a sharded replica polls the
// syncs of its own share (see infrahubsync.Options.Owns).
func (o *Operator) runControllers(ctx context.Context) error {
	syncDone := make(chan error, 1)
	go func() { syncDone <- o.runSyncController(ctx) }()
	err := o.Controller.Run(ctx, o.opts.Workers)
	return errors.Join(err, <-syncDone)
}

// trusted says which namespaces may act as the operator, for the log.
func (o *Operator) trusted() []string {
	if len(o.opts.TrustedNamespaces) == 0 {
		return []string{o.opts.Namespace}
	}
	return o.opts.TrustedNamespaces
}

// Leading reports whether this replica currently reconciles.
func (o *Operator) Leading() bool { return o.leading.Load() }

// Ready reports whether the caches the operator serves from are synced; a
// standby replica is ready too, so that it can take over at once.
func (o *Operator) Ready() bool {
	return o.Config.HasSynced() && o.Controller.HasSynced() && (o.Syncs == nil || o.Syncs.HasSynced())
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	"github.com/vidra-operator/vidra/internal/sourcewatch"
	"github.com/vidra-operator/vidra/internal/wakequeue"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	listers "github.com/vidra-operator/vidra/pkg/generated/listers/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
	"github.com/vidra-operator/vidra/pkg/watchregistry/promcollector"
)

// Parts are the collaborators a Controller works with: what wakes a
// resource and the queue it wakes into (Wakes), the watch registry of the
// managed objects, the destination resolver, the watch of the sources of
// spec.manifestFrom and the apply engine. NewParts builds them as the
// operator runs them; each is built before those that need it, so none is
// handed another after it was built.
type Parts struct {
	Wakes    *Wakes
	Registry *watchregistry.Registry[cache.ObjectName]
	Resolver *destination.Resolver
	Sources  *sourcewatch.Watcher
	Engine   *apply.Engine
}

// PartsOptions are the settings of the parts. Zero values take the
// documented defaults.
type PartsOptions struct {
	// Namespace is the operator's own namespace.
	Namespace string
	// DefaultServiceAccount is impersonated for resources that name none.
	DefaultServiceAccount string
	// TrustedNamespaces are the namespaces whose resources may act with the
	// operator's own identity when they name no ServiceAccount; nil means
	// Namespace alone, destination.AllNamespaces every namespace.
	// Resources elsewhere that name none apply nothing
	// (ServiceAccountRequired).
	TrustedNamespaces []string
	// RemoteGuard limits where remote destinations may lead.
	RemoteGuard destination.Guard
	// Config returns the settings in force; nil means config.Default.
	Config func() *config.Config
	// Recorder records the engine's Events (hand-overs); nil discards
	// them.
	Recorder record.EventRecorder
	// Registerer receives the watch registry's and the engine's metrics.
	Registerer prometheus.Registerer
	// QueueMetrics, if set, receives the work queue's depth, latency and
	// retries (client-go's workqueue metrics).
	QueueMetrics workqueue.MetricsProvider
	// Clock is injectable for tests; the Controller tells time by it too.
	Clock clock.WithTicker
	// Linger is how long an informer nobody needs keeps running; zero means
	// watchregistry.DefaultLinger.
	Linger time.Duration
	// Informers bounds the informers of the managed objects: per namespace
	// of the resources that need them (PerTenant), per destination
	// cluster and in all. A zero field means its default
	// (DefaultInformerBudget).
	Informers watchregistry.InformerBudget
	// CacheBudgets are the byte budgets of the namespaces' cached objects
	// (see internal/cachecharge); nil means cachecharge.NewBudgets(0).
	CacheBudgets *cachecharge.Budgets
	// PartialView tells that the VidraResource informer holds only some
	// resources (one namespace, a shard selector): an owner it does not
	// hold may then exist, and objects left by an owner that seems gone are
	// not adopted.
	PartialView bool
	// Shard, when set, is this replica's share of the VidraResources of a
	// sharded operator: the controller reconciles only the keys Shard lets
	// it enter, and must be told when the share changes (ShardChanged).
	Shard Shard
}

// NewParts builds the parts of a Controller over the lister of its
// VidraResource informer.
func NewParts(ctx context.Context, clients Clients, lister listers.VidraResourceLister, opts PartsOptions) (Parts, error) {
	if opts.Config == nil {
		def := config.Default()
		opts.Config = func() *config.Config { return def }
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.CacheBudgets == nil {
		opts.CacheBudgets = cachecharge.NewBudgets(0)
	}
	opts.Informers.PerTenant = cmp.Or(opts.Informers.PerTenant, DefaultInformerBudget.PerTenant)
	opts.Informers.PerCluster = cmp.Or(opts.Informers.PerCluster, DefaultInformerBudget.PerCluster)
	opts.Informers.Total = cmp.Or(opts.Informers.Total, DefaultInformerBudget.Total)

	index := apply.NewWakeIndex()
	w := &Wakes{
		queue:  wakequeue.New(wakequeue.Options{Clock: opts.Clock, Metrics: opts.QueueMetrics}),
		share:  newShare(opts.Shard),
		health: wakequeue.NewPacer(),
		clock:  opts.Clock, lister: lister, config: opts.Config, index: index,
		budgets: opts.CacheBudgets, uids: newResourceUIDs(), partialView: opts.PartialView,
	}
	reg, err := watchregistry.New(watchregistry.Options[cache.ObjectName]{
		// Objects labelled by someone else without an owner are not even
		// listed; Keep drops those whose owner is not a VidraResource.
		LabelSelector: objectSelector(nil),
		Keep:          w.keep,
		// Only what an owner declares is held in full, charged to its
		// namespace; the rest is a stub.
		Charge: w.charge,
		Linger: opts.Linger,
		// A namespace is charged for the kinds its resources need
		// watched, shared with other namespaces or not.
		Informers: opts.Informers,
		Tenant:    func(key cache.ObjectName) string { return key.Namespace },
		Map:       w.ownerOf,
		Enqueue:   w.wake,
		// Status-only updates wake the owner only when the object's health
		// changes: a Deployment's status churns without that.
		WakeDigest:   health.Digest,
		Transform:    w.transform,
		FieldManager: v1alpha1.FieldManager,
		Clock:        opts.Clock,
		Logger:       klog.FromContext(ctx).WithName("watchregistry"),
	})
	if err != nil {
		return Parts{}, fmt.Errorf("create watch registry: %w", err)
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(promcollector.New(reg, "vidra_watchregistry")); err != nil {
			return Parts{}, fmt.Errorf("register watch registry metrics: %w", err)
		}
	}
	dests, err := destination.New(destination.Options{
		Kube: clients.Kube, Dynamic: clients.Dynamic, Config: clients.Config, Metadata: clients.Metadata, Discovery: clients.Discovery,
		Registry: reg, Clock: opts.Clock,
		Namespace: opts.Namespace, DefaultServiceAccount: opts.DefaultServiceAccount, TrustedNamespaces: opts.TrustedNamespaces,
		Guard: opts.RemoteGuard, Enqueue: w.Event,
	})
	if err != nil {
		return Parts{}, err
	}
	// The objects of spec.manifestFrom are watched by the operator's own
	// identity, metadata only, and read by each resource's.
	sources := sourcewatch.New(dests.Local().Meta, w.Event)
	engine := apply.New(apply.Options{
		Registry: reg, Wakes: index, Owners: lister, Vidra: clients.Vidra, Recorder: opts.Recorder, Enqueue: w.Event,
		Home: dests.Home, Sources: sources, Resources: w.Resources, Local: dests.Local().Meta,
		Registerer: opts.Registerer, Clock: opts.Clock,
	})
	return Parts{Wakes: w, Registry: reg, Resolver: dests, Sources: sources, Engine: engine}, nil
}

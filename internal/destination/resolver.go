// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/internal/destination/guard"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// Options configure a Resolver.
type Options struct {
	// Kube, Dynamic and Config are the operator's clients of the cluster it
	// runs in; impersonating clients derive from Config.
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Config  *rest.Config
	// Metadata and Discovery, when set, replace the metadata client built
	// from Config and the discovery client built on Kube's REST client.
	// Neither fake clientset offers those (the fake Kube has no REST
	// client), so tests that resolve destinations without an API server
	// pass fakes here; nil builds the real ones.
	Metadata  metadata.Interface
	Discovery discovery.DiscoveryInterface
	// Registry is told of every destination cluster, so that it can watch
	// objects there.
	Registry *watchregistry.Registry[cache.ObjectName]
	Clock    clock.Clock
	// Namespace is the operator's own: legacy labelled kubeconfig Secrets
	// are read there only.
	Namespace string
	// DefaultServiceAccount is impersonated for resources that name none.
	DefaultServiceAccount string
	// TrustedNamespaces may act with the operator's identity; nil means
	// Namespace alone, AllNamespaces every namespace.
	TrustedNamespaces []string
	// Guard limits where remote destinations may lead.
	Guard Guard
	// Enqueue wakes a VidraResource whose destination changed (its
	// kubeconfig Secret was edited, rotated or deleted).
	Enqueue func(cache.ObjectName)
}

// Resolver resolves the destination of each VidraResource: the local
// cluster, or a remote one through a kubeconfig Secret, each with the
// identity the resource asks for, or is allowed.
type Resolver struct {
	local     *clusterClients
	remotes   *remotes
	trust     trust
	defaultSA string
}

// New builds a Resolver; Run starts the watches of kubeconfig Secrets it
// needs.
func New(opts Options) (*Resolver, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Enqueue == nil {
		opts.Enqueue = func(cache.ObjectName) {}
	}
	if opts.Discovery == nil {
		opts.Discovery = discovery.NewDiscoveryClient(opts.Kube.Discovery().RESTClient())
	}
	local, err := newClusterClients(LocalCluster, opts.Config, opts.Dynamic, opts.Metadata, newMapper(opts.Discovery, opts.Clock))
	if err != nil {
		return nil, err
	}
	// The objects of the local cluster held in full are charged to their
	// owners' namespaces (internal/cachecharge); this budget bounds the
	// stubs of the rest, which no tenant pays for.
	opts.Registry.SetCluster(LocalCluster, opts.Dynamic, nil,
		watchregistry.WithBudget(watchregistry.NewBudget(guard.LocalStubObjects, watchregistry.BudgetName("local stubs"))))
	g, err := guard.New(opts.Guard)
	if err != nil {
		return nil, err
	}
	d := &Resolver{local: local, trust: newTrust(opts.TrustedNamespaces, opts.Namespace), defaultSA: opts.DefaultServiceAccount}
	d.remotes = newRemotes(opts, g, local)
	return d, nil
}

// Run starts the Secret informers of remote destinations on demand, under
// ctx, and returns once ctx has ended and they have all stopped.
func (d *Resolver) Run(ctx context.Context) {
	d.Start(ctx)
	<-ctx.Done()
	d.remotes.wait()
}

// Start lets Resolve start the Secret informers of remote destinations, under
// ctx, from now on; Run calls it first. It is apart from Run so that a caller
// that resolves right after starting Run in a goroutine (a test that calls
// the controller's sync directly) does not race it: Resolve of a remote
// destination fails until one of them has run.
func (d *Resolver) Start(ctx context.Context) { d.remotes.start(ctx) }

// Local is the cluster Vidra runs in, with the operator's own identity.
func (d *Resolver) Local() *Target {
	return &Target{Cluster: LocalCluster, Client: d.local.client, Meta: d.local.meta, Mapper: d.local.mapper, own: d.local.meta}
}

// Resolve returns the destination of vr. The identity is decided first, so
// that a resource that may not act at all contacts nothing. A remote
// destination that cannot be used (its Secret missing or unreadable by the
// resource's identity, its kubeconfig bad, its server unreachable) is an
// error: it is never silently replaced by the local cluster.
func (d *Resolver) Resolve(ctx context.Context, vr *v1alpha1.VidraResource) (*Target, error) {
	key := cache.MetaObjectToName(vr)
	sa, err := actingServiceAccount(vr.Namespace, vr.Spec.ServiceAccountName, d.defaultSA, d.trust)
	if err != nil {
		d.remotes.release(key)
		return nil, err
	}
	cc := d.local
	if vr.Spec.Destination.KubeconfigSecretRef != nil || !IsLocalServer(vr.Spec.Destination.Server) {
		if cc, err = d.remotes.resolve(ctx, key, vr, sa, d.trust.trusts(vr.Namespace)); err != nil {
			return nil, err
		}
	} else {
		d.remotes.release(key)
	}
	dest := &Target{Cluster: cc.name, Client: cc.client, Meta: cc.meta, Mapper: cc.mapper, own: cc.meta}
	if sa == "" {
		return dest, nil
	}
	as, err := cc.as(vr.Namespace, sa)
	if err != nil {
		return nil, err
	}
	dest.Client, dest.Meta, dest.ServiceAccount = as.client, as.meta, vr.Namespace+"/"+sa
	return dest, nil
}

// Release forgets what was held for a VidraResource that is gone: its use
// of a kubeconfig Secret, and the clients and watches of a remote cluster
// nobody else uses.
func (d *Resolver) Release(key cache.ObjectName) { d.remotes.release(key) }

// probeKey marks a context whose Resolve checks that a remote destination
// answers, even when it did so recently.
type probeKey struct{}

// WithProbe asks Resolve, under the returned context, to check that a remote
// destination answers before it is used: a reconcile a person requested
// must not report an outage as success, nor hang on a silent server.
func WithProbe(ctx context.Context) context.Context { return context.WithValue(ctx, probeKey{}, true) }

func probeRequested(ctx context.Context) bool { b, _ := ctx.Value(probeKey{}).(bool); return b }

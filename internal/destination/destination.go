// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"

	"github.com/vidra-operator/vidra/internal/destination/guard"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// LocalCluster is the watch registry's name for the cluster Vidra runs in.
const LocalCluster = ""

// inClusterServer is how manifests name the cluster Vidra runs in.
const inClusterServer = "https://kubernetes.default.svc"

// Target is where one VidraResource's objects go, with the identity that
// writes them.
type Target struct {
	// Cluster keys the watch registry and the RESTMapper.
	Cluster string
	// Client reads and writes objects, impersonating the resource's
	// ServiceAccount when it names one.
	Client dynamic.Interface
	// Meta sends the writes whose answer Vidra reads only the metadata of
	// (applies above all): the API server answers with the object's
	// metadata, in protobuf where it can, which costs both sides far less
	// than encoding and decoding the whole object as JSON.
	Meta   metadata.Interface
	Mapper *Mapper
	// ServiceAccount is the impersonated identity, namespace/name, or ""
	// for the operator's own.
	ServiceAccount string

	// own reads with the operator's identity what is not the resource's to
	// read (NamespaceDeleting).
	own metadata.Interface
}

// NamespaceDeleting reports whether namespace ns of the destination is being
// deleted, so that a cleanup leaves its objects to the namespace's deletion.
// It asks with the operator's own identity: a ServiceAccount a resource acts
// as seldom may read namespaces, and the RoleBinding that lets it act is
// often deleted with the namespace, before the resource's cleanup runs. An
// error (the namespace gone, or unreadable) counts as not being deleted.
func (t *Target) NamespaceDeleting(ctx context.Context, ns string) bool {
	// The metadata client puts ns in the request's path unchecked: a name
	// that is none ("kube-system/services/x:443/proxy") would make the
	// operator's identity ask another path.
	if len(validation.IsDNS1123Label(ns)) > 0 {
		return false
	}
	obj, err := t.own.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, ns, metav1.GetOptions{})
	return err == nil && obj.GetDeletionTimestamp() != nil
}

// clusterClients are the clients of one destination cluster: the
// operator's own (informers, discovery) and, built on demand and cached, one
// per impersonated ServiceAccount.
type clusterClients struct {
	name string
	// config is the request configuration impersonating clients derive from.
	config *rest.Config
	client dynamic.Interface
	meta   metadata.Interface
	mapper *Mapper
	// breaker, probe and guarded are set for remote clusters only.
	breaker *breaker
	probe   rest.Interface
	guarded *guard.Cluster

	mu sync.Mutex
	// http is the HTTP client of config, which the impersonating clients
	// share: built once, and for a remote cluster the one its request
	// clients share (client-go does not share the transports of a
	// configuration with a dialer of its own).
	http *http.Client
	// impersonated holds the clients of the ServiceAccounts used most
	// recently, at most maxImpersonated: a tenant names any ServiceAccount
	// it likes, as many times as it likes.
	impersonated *lru.Cache
}

// maxImpersonated bounds the impersonating clients kept per cluster. They
// cost a few KiB each, over the cluster's shared HTTP client; one evicted is
// built again when next used.
const maxImpersonated = 1024

// impersonated are the clients of one impersonated ServiceAccount.
type impersonated struct {
	client dynamic.Interface
	meta   metadata.Interface
}

// newClusterClients builds the clients of a cluster; md, when nil, is built
// from cfg.
func newClusterClients(name string, cfg *rest.Config, client dynamic.Interface, md metadata.Interface, mapper *Mapper) (*clusterClients, error) {
	if md == nil {
		if cfg == nil {
			return nil, fmt.Errorf("clients of cluster %q: no client configuration", name)
		}
		var err error
		if md, err = metadata.NewForConfig(cfg); err != nil {
			return nil, fmt.Errorf("metadata client of cluster %q: %w", name, err)
		}
	}
	return &clusterClients{name: name, config: cfg, client: client, meta: md, mapper: mapper, impersonated: lru.New(maxImpersonated)}, nil
}

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

// trust is the set of namespaces whose VidraResources may act with the
// operator's own identity (--trusted-namespaces).
type trust struct {
	all        bool
	namespaces map[string]bool
}

// AllNamespaces in TrustedNamespaces trusts every namespace: the behaviour
// of a single-tenant cluster, where whoever may create a VidraResource may
// act as the operator.
const AllNamespaces = "*"

// newTrust trusts the namespaces listed, or the operator's own namespace
// when none are: like Argo CD, which trusts only its own namespace unless
// told otherwise.
func newTrust(namespaces []string, own string) trust {
	t := trust{namespaces: map[string]bool{}}
	for _, ns := range namespaces {
		ns = strings.TrimSpace(ns)
		switch ns {
		case "":
		case AllNamespaces:
			t.all = true
		default:
			t.namespaces[ns] = true
		}
	}
	if !t.all && len(t.namespaces) == 0 && own != "" {
		t.namespaces[own] = true
	}
	return t
}

func (t trust) trusts(namespace string) bool { return t.all || t.namespaces[namespace] }

// String lists the trusted namespaces, for messages.
func (t trust) String() string {
	if t.all {
		return AllNamespaces
	}
	return strings.Join(slices.Sorted(maps.Keys(t.namespaces)), ",")
}

// actingServiceAccount decides who acts for a VidraResource of namespace:
// the ServiceAccount it names; else the operator's default ServiceAccount;
// else, in a trusted namespace only, the operator itself (""). Anywhere
// else the resource may not act at all: it would write with the operator's
// rights, which are meant for its administrators' resources.
func actingServiceAccount(namespace, named, defaultSA string, t trust) (string, error) {
	sa := named
	if sa == "" {
		sa = defaultSA
	}
	if sa != "" {
		// The CRD refuses such names already; an older CRD, or a client that
		// skips validation, must not turn "a:b" into the user of another
		// namespace's ServiceAccount.
		if errs := validation.IsDNS1123Subdomain(sa); len(errs) > 0 {
			return "", &refusedError{reason: v1alpha1.ReasonServiceAccountRequired,
				msg: fmt.Sprintf("spec.serviceAccountName %q is not a ServiceAccount name: %s", sa, strings.Join(errs, "; "))}
		}
		return sa, nil
	}
	if t.trusts(namespace) {
		return "", nil
	}
	return "", &refusedError{reason: v1alpha1.ReasonServiceAccountRequired, msg: fmt.Sprintf(
		"nothing applied: namespace %s is not trusted to act with the operator's identity, and the resource names no ServiceAccount; "+
			"set spec.serviceAccountName to a ServiceAccount of %s allowed to write these objects, "+
			"or run the operator with --default-service-account, "+
			"or add %s to the operator's --trusted-namespaces (now %s)", namespace, namespace, namespace, t)}
}

// refusedError is a destination or identity Vidra will not use for a
// resource: no retry can change that, only a change of the resource or of
// the operator's flags. The resource stalls with reason.
type refusedError struct {
	reason string
	msg    string
}

func (e *refusedError) Error() string { return e.msg }

// IsRefused reports whether err refuses the resource's identity outright,
// so that it never acted and has nothing to clean up with it.
func IsRefused(err error) bool {
	var r *refusedError
	return errors.As(err, &r) && r.reason == v1alpha1.ReasonServiceAccountRequired
}

// Failure maps an error of resolve to the condition reason it
// reports and whether a retry may fix it.
func Failure(err error) (reason string, retry bool) {
	var r *refusedError
	if errors.As(err, &r) {
		return r.reason, false
	}
	var f *forbiddenSecretError
	if errors.As(err, &f) {
		return v1alpha1.ReasonForbidden, true
	}
	return v1alpha1.ReasonDestinationError, true
}

// as returns a client acting as ServiceAccount namespace/name of the
// cluster. Every request of a resource that names a ServiceAccount goes
// through it.
//
// It names the user only: for a ServiceAccount user the API server then adds
// exactly the groups a token of that ServiceAccount would carry
// (system:serviceaccounts, system:serviceaccounts:<namespace> and
// system:authenticated), so RBAC bound to those groups applies, and the
// operator needs the impersonate verb on serviceaccounts alone, not on
// groups.
func (cc *clusterClients) as(namespace, name string) (*impersonated, error) {
	user := "system:serviceaccount:" + namespace + ":" + name
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if c, ok := cc.impersonated.Get(user); ok {
		return c.(*impersonated), nil
	}
	if cc.config == nil {
		return nil, fmt.Errorf("impersonate %s: the operator's client configuration is not known", user)
	}
	if cc.http == nil {
		hc, err := rest.HTTPClientFor(cc.config)
		if err != nil {
			return nil, fmt.Errorf("HTTP client of cluster %q: %w", cc.name, err)
		}
		cc.http = hc
	}
	// The user is named outermost, over the cluster's transport, as
	// client-go does for a configuration that impersonates.
	hc := *cc.http
	base := hc.Transport
	if base == nil {
		// A configuration without TLS, wrappers or a timeout gets
		// http.DefaultClient, whose nil transport is the default one: the
		// impersonating wrapper needs it named.
		base = http.DefaultTransport
	}
	hc.Transport = transport.NewImpersonatingRoundTripper(transport.ImpersonationConfig{UserName: user}, base)
	dyn, err := dynamic.NewForConfigAndClient(cc.config, &hc)
	if err != nil {
		return nil, fmt.Errorf("client impersonating %s: %w", user, err)
	}
	md, err := metadata.NewForConfigAndClient(cc.config, &hc)
	if err != nil {
		return nil, fmt.Errorf("metadata client impersonating %s: %w", user, err)
	}
	c := &impersonated{client: dyn, meta: md}
	cc.impersonated.Add(user, c)
	return c, nil
}

// Mapper maps kinds to resources through discovery, refreshing on a miss
// (a CRD created since the last refresh) at most once per second, so that a
// manifest with an unknown kind retried by many resources does not turn into
// a discovery storm.
type Mapper struct {
	mapper *restmapper.DeferredDiscoveryRESTMapper
	// discovery is the mapper's cache, read again for what a manifest
	// naming a kind the destination does not serve likely meant.
	discovery discovery.CachedDiscoveryInterface
	clock     clock.Clock

	mu        sync.Mutex
	lastReset time.Time
	// found holds the mappings found since the last refresh, which the
	// deferred mapper would answer the same until then: it scans every
	// served resource at each call, and a reconcile asks twice per object.
	// generation counts refreshes, so that a lookup that raced one is not
	// kept.
	found      sync.Map // schema.GroupVersionKind → *meta.RESTMapping
	generation atomic.Uint64
	// missed holds the errors of the kinds found unserved since the last
	// refresh. A manifest may name an unserved kind a thousand times, and
	// each miss went through every resource served to say what the
	// manifest likely meant: 4 ms with 2,500 CRDs, seconds of CPU for one
	// reconcile. A kind missed is looked up again once discovery was
	// refreshed, which a miss asks for at most once a second.
	missed sync.Map // schema.GroupVersionKind → error
	// served indexes the kinds served, for suggestions: built once per
	// generation, and suggesting for at most maxSuggestions kinds in it.
	served atomic.Pointer[servedKindsOf]
}

// servedKindsOf is the index of the kinds served in one generation of the
// mapper, and how many suggestions it made.
type servedKindsOf struct {
	*kindIndex
	generation  uint64
	suggestions atomic.Int64
}

// maxSuggestions bounds the kinds suggested for per generation of the
// mapper: one costs a look at every kind of the group named, which a
// tenant's server chooses, and a manifest may name thousands of unserved
// kinds. Beyond it, a kind is only not served.
const maxSuggestions = 64

func newMapper(dc discovery.DiscoveryInterface, clk clock.Clock) *Mapper {
	cached := memory.NewMemCacheClient(dc)
	return &Mapper{mapper: restmapper.NewDeferredDiscoveryRESTMapper(cached), discovery: cached, clock: clk}
}

// Mapping returns the resource of a kind. The mapping is shared: callers
// must not change it.
func (m *Mapper) Mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	if mp, ok := m.found.Load(gvk); ok {
		return mp.(*meta.RESTMapping), nil
	}
	if err, ok := m.missed.Load(gvk); ok && !m.Refresh(false) {
		return nil, err.(error)
	}
	gen := m.generation.Load()
	mp, err := m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil && (meta.IsNoMatchError(err)) && m.Refresh(false) {
		gen = m.generation.Load()
		mp, err = m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err == nil {
		m.mu.Lock()
		if m.generation.Load() == gen {
			m.found.Store(gvk, mp)
		}
		m.mu.Unlock()
	}
	if meta.IsNoMatchError(err) {
		// A group whose discovery document Vidra refused (over its
		// namespace's pool) has no kinds to the mapper: the refusal, not
		// "no matches", is what to say. Other failures of a group's
		// discovery (an aggregated API down, a CRD not yet served) stay
		// "no matches", as before.
		_, derr := m.discovery.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
		if refused := RefusedAnswer(derr); refused != nil {
			err = fmt.Errorf("discover the kinds of %s: %w", gvk.GroupVersion(), refused)
		} else {
			err = m.suggest(gen, gvk, err)
		}
		m.mu.Lock()
		if m.generation.Load() == gen {
			m.missed.Store(gvk, err)
		}
		m.mu.Unlock()
		return nil, err
	}
	return mp, err
}

// suggest wraps err, a no-match error for gvk found in generation gen, with
// what the manifest likely meant (see SuggestKind), through the index of
// the generation.
func (m *Mapper) suggest(gen uint64, gvk schema.GroupVersionKind, err error) error {
	ix := m.served.Load()
	if ix == nil || ix.generation != gen {
		lists, _ := m.discovery.ServerPreferredResources()
		ix = &servedKindsOf{kindIndex: newKindIndex(lists), generation: gen}
		m.mu.Lock()
		if m.generation.Load() == gen {
			m.served.Store(ix)
		}
		m.mu.Unlock()
	}
	if ix.suggestions.Add(1) > maxSuggestions {
		return err
	}
	return ix.suggest(gvk, err)
}

// refresh drops the discovery cache; force skips the rate limit, for when a
// CRD was just established.
func (m *Mapper) Refresh(force bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	if !force && now.Sub(m.lastReset) < time.Second {
		return false
	}
	m.lastReset = now
	// The generation moves last: a lookup that read the new one asked the
	// mapper after its reset, and one that read the old one keeps nothing.
	m.mapper.Reset()
	m.found.Clear()
	m.missed.Clear()
	m.generation.Add(1)
	return true
}

func (m *Mapper) Namespaced(gvk schema.GroupVersionKind) (bool, error) {
	mp, err := m.Mapping(gvk)
	if err != nil {
		return false, err
	}
	return mp.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// localCluster is the watch registry's name for the cluster Vidra runs in.
const localCluster = ""

// inClusterServer is how manifests name the cluster Vidra runs in.
const inClusterServer = "https://kubernetes.default.svc"

func newLimiter(qps float64, burst int) *rate.Limiter { return rate.NewLimiter(rate.Limit(qps), burst) }

// destination is where one VidraResource's objects go, with the identity
// that writes them.
type destination struct {
	// cluster keys the watch registry and the RESTMapper.
	cluster string
	// client reads and writes objects, impersonating the resource's
	// ServiceAccount when it names one.
	client dynamic.Interface
	// meta sends the writes whose answer Vidra reads only the metadata of
	// (applies above all): the API server answers with the object's
	// metadata, in protobuf where it can, which costs both sides far less
	// than encoding and decoding the whole object as JSON.
	meta   metadata.Interface
	mapper *restMapper
	// serviceAccount is the impersonated identity, for messages.
	serviceAccount string
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
	mapper *restMapper
	// breaker and probe are set for remote clusters only.
	breaker *breaker
	probe   rest.Interface

	mu           sync.Mutex
	impersonated map[string]*impersonated
}

// impersonated are the clients of one impersonated ServiceAccount.
type impersonated struct {
	client dynamic.Interface
	meta   metadata.Interface
}

func newClusterClients(name string, cfg *rest.Config, client dynamic.Interface, mapper *restMapper) (*clusterClients, error) {
	if cfg == nil {
		return nil, fmt.Errorf("clients of cluster %q: no client configuration", name)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client of cluster %q: %w", name, err)
	}
	return &clusterClients{name: name, config: cfg, client: client, meta: md, mapper: mapper, impersonated: map[string]*impersonated{}}, nil
}

// destinations resolves the destination of each VidraResource: the local
// cluster, or a remote one through a kubeconfig Secret, each with the
// identity the resource asks for, or is allowed.
type destinations struct {
	local   *clusterClients
	remotes *remotes
	trust   trust
}

type cacheKey = cache.ObjectName

func newDestinations(clients Clients, reg *watchregistry.Registry[cacheKey], clk clock.Clock, namespace string, trusted []string, guard RemoteGuard, enqueue func(cacheKey)) (*destinations, error) {
	local, err := newClusterClients(localCluster, clients.Config, clients.Dynamic,
		newRESTMapper(discovery.NewDiscoveryClient(clients.Kube.Discovery().RESTClient()), clk))
	if err != nil {
		return nil, err
	}
	reg.SetCluster(localCluster, clients.Dynamic, nil)
	g, err := newRemoteGuard(guard)
	if err != nil {
		return nil, err
	}
	d := &destinations{local: local, trust: newTrust(trusted, namespace)}
	d.remotes = newRemotes(clients, reg, clk, namespace, g, local, enqueue)
	return d, nil
}

// resolve returns the destination of vr. The identity is decided first, so
// that a resource that may not act at all contacts nothing. A remote
// destination that cannot be used (its Secret missing or unreadable by the
// resource's identity, its kubeconfig bad, its server unreachable) is an
// error: it is never silently replaced by the local cluster.
func (d *destinations) resolve(ctx context.Context, vr *v1alpha1.VidraResource, defaultSA string) (*destination, error) {
	key := cache.MetaObjectToName(vr)
	sa, err := actingServiceAccount(vr.Namespace, vr.Spec.ServiceAccountName, defaultSA, d.trust)
	if err != nil {
		d.remotes.release(key)
		return nil, err
	}
	cc := d.local
	if vr.Spec.Destination.KubeconfigSecretRef != nil || !isLocalServer(vr.Spec.Destination.Server) {
		if cc, err = d.remotes.resolve(ctx, key, vr, sa, d.trust.trusts(vr.Namespace)); err != nil {
			return nil, err
		}
	} else {
		d.remotes.release(key)
	}
	dest := &destination{cluster: cc.name, client: cc.client, meta: cc.meta, mapper: cc.mapper}
	if sa == "" {
		return dest, nil
	}
	as, err := cc.as(vr.Namespace, sa)
	if err != nil {
		return nil, err
	}
	dest.client, dest.meta, dest.serviceAccount = as.client, as.meta, vr.Namespace+"/"+sa
	return dest, nil
}

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

// isRefused reports whether err refuses the resource's identity outright,
// so that it never acted and has nothing to clean up with it.
func isRefused(err error) bool {
	var r *refusedError
	return errors.As(err, &r) && r.reason == v1alpha1.ReasonServiceAccountRequired
}

// destinationFailure maps an error of resolve to the condition reason it
// reports and whether a retry may fix it.
func destinationFailure(err error) (reason string, retry bool) {
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

// release forgets what was held for a VidraResource that is gone.
func (d *destinations) release(key cacheKey) { d.remotes.release(key) }

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
	if c, ok := cc.impersonated[user]; ok {
		return c, nil
	}
	if cc.config == nil {
		return nil, fmt.Errorf("impersonate %s: the operator's client configuration is not known", user)
	}
	cfg := rest.CopyConfig(cc.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client impersonating %s: %w", user, err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client impersonating %s: %w", user, err)
	}
	c := &impersonated{client: dyn, meta: md}
	cc.impersonated[user] = c
	return c, nil
}

// restMapper maps kinds to resources through discovery, refreshing on a miss
// (a CRD created since the last refresh) at most once per second, so that a
// manifest with an unknown kind retried by many resources does not turn into
// a discovery storm.
type restMapper struct {
	mapper *restmapper.DeferredDiscoveryRESTMapper
	clock  clock.Clock

	mu        sync.Mutex
	lastReset time.Time
}

func newRESTMapper(dc discovery.DiscoveryInterface, clk clock.Clock) *restMapper {
	return &restMapper{mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), clock: clk}
}

func (m *restMapper) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	mp, err := m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil && (meta.IsNoMatchError(err)) && m.refresh(false) {
		mp, err = m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return mp, err
}

// refresh drops the discovery cache; force skips the rate limit, for when a
// CRD was just established.
func (m *restMapper) refresh(force bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	if !force && now.Sub(m.lastReset) < time.Second {
		return false
	}
	m.lastReset = now
	m.mapper.Reset()
	return true
}

func (m *restMapper) namespaced(gvk schema.GroupVersionKind) (bool, error) {
	mp, err := m.mapping(gvk)
	if err != nil {
		return false, err
	}
	return mp.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

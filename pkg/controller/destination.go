package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
// identity the resource asks for.
type destinations struct {
	local   *clusterClients
	remotes *remotes
}

type cacheKey = cache.ObjectName

func newDestinations(clients Clients, reg *watchregistry.Registry[cacheKey], clk clock.Clock, namespace string, enqueue func(cacheKey)) (*destinations, error) {
	local, err := newClusterClients(localCluster, clients.Config, clients.Dynamic,
		newRESTMapper(discovery.NewDiscoveryClient(clients.Kube.Discovery().RESTClient()), clk))
	if err != nil {
		return nil, err
	}
	reg.SetCluster(localCluster, clients.Dynamic, nil)
	return &destinations{local: local, remotes: newRemotes(clients, reg, clk, namespace, enqueue)}, nil
}

// resolve returns the destination of vr. A remote destination that cannot
// be used (its Secret missing, its kubeconfig bad, its server unreachable)
// is an error: it is never silently replaced by the local cluster.
func (d *destinations) resolve(ctx context.Context, vr *v1alpha1.VidraResource, defaultSA string) (*destination, error) {
	key := cache.MetaObjectToName(vr)
	cc := d.local
	if vr.Spec.Destination.KubeconfigSecretRef != nil || !isLocalServer(vr.Spec.Destination.Server) {
		var err error
		if cc, err = d.remotes.resolve(ctx, key, vr); err != nil {
			return nil, err
		}
	} else {
		d.remotes.release(key)
	}
	dest := &destination{cluster: cc.name, client: cc.client, meta: cc.meta, mapper: cc.mapper}
	sa := vr.Spec.ServiceAccountName
	if sa == "" {
		sa = defaultSA
	}
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

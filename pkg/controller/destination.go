package controller

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
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
	mapper *restMapper
	// serviceAccount is the impersonated identity, for messages.
	serviceAccount string
}

// destinations caches clients and RESTMappers per cluster and identity.
type destinations struct {
	clients  Clients
	registry *watchregistry.Registry[cacheKey]
	clock    clock.Clock

	mu           sync.Mutex
	mappers      map[string]*restMapper
	impersonated map[string]dynamic.Interface
}

type cacheKey = cache.ObjectName

func newDestinations(clients Clients, reg *watchregistry.Registry[cacheKey], clk clock.Clock) *destinations {
	d := &destinations{
		clients:      clients,
		registry:     reg,
		clock:        clk,
		mappers:      map[string]*restMapper{},
		impersonated: map[string]dynamic.Interface{},
	}
	reg.SetCluster(localCluster, clients.Dynamic, nil)
	return d
}

// resolve returns the destination of vr. Remote servers are not served by
// this build: they are reported as a destination error, never silently
// applied to the local cluster.
func (d *destinations) resolve(vr *v1alpha1.VidraResource, defaultSA string) (*destination, error) {
	server := vr.Spec.Destination.Server
	if server != "" && server != inClusterServer && server != inClusterServer+":443" {
		return nil, fmt.Errorf("destination server %q: remote destinations are not supported yet; use an empty server for the local cluster", server)
	}
	sa := vr.Spec.ServiceAccountName
	if sa == "" {
		sa = defaultSA
	}
	dest := &destination{cluster: localCluster, mapper: d.mapper(localCluster)}
	if sa == "" {
		dest.client = d.clients.Dynamic
		return dest, nil
	}
	client, err := d.impersonating(vr.Namespace, sa)
	if err != nil {
		return nil, err
	}
	dest.client, dest.serviceAccount = client, vr.Namespace+"/"+sa
	return dest, nil
}

func (d *destinations) mapper(cluster string) *restMapper {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.mappers[cluster]
	if m == nil {
		m = newRESTMapper(discovery.NewDiscoveryClient(d.clients.Kube.Discovery().RESTClient()), d.clock)
		d.mappers[cluster] = m
	}
	return m
}

// impersonating returns a client acting as ServiceAccount namespace/name,
// with the groups the API server gives ServiceAccounts, so that RBAC bound to
// those groups applies too.
func (d *destinations) impersonating(namespace, name string) (dynamic.Interface, error) {
	user := "system:serviceaccount:" + namespace + ":" + name
	d.mu.Lock()
	defer d.mu.Unlock()
	if c, ok := d.impersonated[user]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(d.clients.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: user,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client impersonating %s: %w", user, err)
	}
	d.impersonated[user] = c
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

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"fmt"
	"net/http"
	"sync"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/utils/lru"

	"github.com/vidra-operator/vidra/internal/destination/guard"
)

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

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/vidra-operator/vidra/internal/destination/guard"
)

// newRemoteClients builds the clients of one remote cluster: for requests,
// with a timeout; for informers, without one, since a watch is one long
// request (their lists get one from the guard), and with room for lists in
// an answer. Both go through one circuit breaker, dial through the guard
// (checked addresses, no proxy) and have answers that are not a Kubernetes
// API server's replaced; impersonating clients copy all of it.
func (r *remotes) newRemoteClients(rk remoteKey, cfg *rest.Config, server string) (*clusterClients, dynamic.Interface, error) {
	b := newBreaker(server, r.clock, r.guard.SlowAnswer())
	cfg.QPS, cfg.Burst, cfg.UserAgent = r.base.QPS, r.base.Burst, r.base.UserAgent
	cfg.Dial, cfg.Proxy = r.guard.Dial, guard.NoProxy
	// The breaker sits outermost: a replaced answer is still an answer, and
	// the time to read it whole is part of the answer's time; one over its
	// limit is a failure (one refused for what it would make Vidra hold
	// fails its request only).
	watchCfg := rest.CopyConfig(cfg)
	// The discovery client, whose documents the RESTMapper keeps, has
	// clients of its own, so that its answers are told apart by the client
	// that asked, not by their path.
	discCfg := rest.CopyConfig(cfg)
	// The operator's own namespace holds the administrators' Secrets (the
	// earlier operator's labelled ones), which no tenant writes: its
	// clusters are not bounded as a tenant's are.
	var gc *guard.Cluster
	if ns := rk.secret.Namespace; ns != r.namespace {
		gc = r.guard.Tenant(server, ns, b.fail)
		// Over HTTP/2 a server may send 4 MiB a stream ahead of what
		// Vidra reads, held in the heap, outside the watch pool, as long as
		// the stream waits for its pace: over HTTP/1.1 a watch waits on its
		// connection's window instead.
		watchCfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
		warnings := &warningLog{server: server, clock: r.clock}
		for _, c := range []*rest.Config{cfg, watchCfg, discCfg} {
			c.WarningHandler, c.WarningHandlerWithContext = nil, warnings
		}
	} else {
		gc = r.guard.Own(server, b.fail)
	}
	cfg.WrapTransport = transport.Wrappers(limitHeaders, gc.Requests, b.wrap)
	watchCfg.WrapTransport = transport.Wrappers(limitHeaders, gc.Informers, b.wrapUntimed)
	discCfg.WrapTransport = transport.Wrappers(limitHeaders, gc.Discovery, b.wrap)
	discCfg.Timeout = remoteTimeout
	cfg.Timeout = remoteTimeout

	// The request clients share one HTTP client, and its connections.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, err
	}
	md, err := metadata.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, err
	}
	probe, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, nil, err
	}
	watchDyn, err := dynamic.NewForConfig(watchCfg)
	if err != nil {
		return nil, nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(discCfg)
	if err != nil {
		return nil, nil, err
	}
	cc, err := newClusterClients(rk.clusterName(), cfg, dyn, md, newMapper(dc, r.clock))
	if err != nil {
		return nil, nil, err
	}
	cc.breaker, cc.probe, cc.guarded, cc.http = b, probe.RESTClient(), gc, hc
	return cc, gc.Lists(watchDyn), nil
}

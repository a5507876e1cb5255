// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"net/http"

	"k8s.io/client-go/dynamic"
)

// Cluster is what the guard holds one remote cluster's clients to: the
// transports of its request, informer and discovery clients, and its share
// of its namespace's pools. It is closed when the cluster's clients are
// dropped.
type Cluster struct {
	g        *Guard
	server   string
	failed   func(error)
	requests answerLimits
	// pool, discovery and slot are the namespace's watch pool, the
	// cluster's account in its discovery pool and the namespace's list
	// slot; nil for a cluster of the operator's own namespace.
	pool      *namespacePool
	discovery *discoveryAccount
	slot      *listSlot
}

// Tenant returns the guard of a cluster at server named by a kubeconfig
// Secret of a tenant's namespace: its watches, discovery and lists are
// counted in the namespace's pools, and an answer about an object is
// bounded by the object (AnswersAbout). failed, if not nil, is told of a
// failure found after a request got its answer (a watch event over its
// limit, a watch past its pool): the circuit breaker's fail.
func (g *Guard) Tenant(server, namespace string, failed func(error)) *Cluster {
	return &Cluster{g: g, server: server, failed: failed, requests: g.requests,
		pool: g.watchPool(namespace), discovery: g.discoveryAccount(namespace), slot: g.listSlot(namespace)}
}

// Own returns the guard of a cluster at server named by a Secret of the
// operator's own namespace, which only administrators write: its answers
// are bounded as any answer, and its clusters share no pool.
func (g *Guard) Own(server string, failed func(error)) *Cluster {
	requests := g.requests
	requests.aboutObjects = false
	return &Cluster{g: g, server: server, failed: failed, requests: requests}
}

// Requests is the rest.Config WrapTransport of the cluster's request
// clients, which reconciles wait on.
func (c *Cluster) Requests(rt http.RoundTripper) http.RoundTripper {
	return c.g.wrapAnswers(c.server, c.requests, c.failed, nil, nil)(rt)
}

// Informers is the WrapTransport of the clients of the cluster's
// informers: lists get a larger bound, and watch streams are counted in
// the namespace's watch pool and paced.
func (c *Cluster) Informers(rt http.RoundTripper) http.RoundTripper {
	return c.g.wrapAnswers(c.server, c.g.informers, c.failed, c.pool, nil)(rt)
}

// Discovery is the WrapTransport of the cluster's discovery client, whose
// documents its RESTMapper keeps: they are counted in the namespace's
// discovery pool.
func (c *Cluster) Discovery(rt http.RoundTripper) http.RoundTripper {
	return c.g.wrapAnswers(c.server, c.g.discovery, c.failed, nil, c.discovery)(rt)
}

// Lists returns the dynamic client of the cluster's informers, d, made to
// list rather than stream lists, one list of the namespace at a time (see
// listsOnly).
func (c *Cluster) Lists(d dynamic.Interface) dynamic.Interface {
	return listsOnly{Interface: d, slot: c.slot}
}

// Close gives back what the cluster holds of its namespace's discovery
// pool. It may be called more than once, and on nil.
func (c *Cluster) Close() {
	if c == nil {
		return
	}
	c.discovery.close()
}

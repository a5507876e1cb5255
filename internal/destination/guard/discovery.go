// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"sync"
	"time"
)

// discoveryAccount returns a new account, in the discovery pool of
// namespace, for the discovery documents of one remote cluster.
func (g *Guard) discoveryAccount(namespace string) *discoveryAccount {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := perNamespace(&g.discoveryPools, namespace, func() *namespacePool { return &namespacePool{namespace: namespace, max: g.discoveryValues} })
	return &discoveryAccount{pool: p, paths: map[string]int64{}}
}

// discoveryAccount is one cluster's share of its namespace's discovery
// pool: the values of the latest answer for each discovery path, which is
// what its mapper holds. It is closed when the cluster's clients are
// dropped.
type discoveryAccount struct {
	pool *namespacePool

	mu     sync.Mutex
	paths  map[string]int64
	closed bool
	// refused is the last refusal, until heldUntil: the cluster's discovery
	// is not asked again before, since the RESTMapper would ask for it on
	// every mapping and get it refused again.
	refused   error
	heldUntil time.Time
}

// discoveryRefusalHold is how long a cluster whose discovery document was
// refused is not asked for discovery again.
const discoveryRefusalHold = 30 * time.Second

// refuse records a refusal of the cluster's discovery.
func (a *discoveryAccount) refuse(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refused, a.heldUntil = err, time.Now().Add(discoveryRefusalHold)
}

// held returns the last refusal while its hold lasts, nil otherwise.
func (a *discoveryAccount) held() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refused == nil || !time.Now().Before(a.heldUntil) {
		return nil
	}
	return a.refused
}

// charge counts an answer of values for path, in place of the path's
// previous one, and reports whether the pool had room for it.
func (a *discoveryAccount) charge(path string, values int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return true
	}
	if !a.pool.resize(a.paths[path], values) {
		return false
	}
	a.paths[path] = values
	return true
}

// close gives what the account holds back to the pool.
func (a *discoveryAccount) close() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.closed = true
	var held int64
	for _, v := range a.paths {
		held += v
	}
	a.pool.resize(held, 0)
	a.paths = nil
}

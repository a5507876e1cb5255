// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// watchPool returns the watch pool of namespace's remote clusters.
func (g *Guard) watchPool(namespace string) *namespacePool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return perNamespace(&g.pools, namespace, func() *namespacePool {
		return &namespacePool{namespace: namespace, max: g.poolBytes, events: rate.NewLimiter(g.eventRate, g.eventBurst)}
	})
}

// namespacePool counts what the remote clusters of one namespace hold of
// one thing, against a bound: the bytes of their watch streams (see
// maxWatchPoolBytes), or the JSON values of their discovery documents (see
// maxDiscoveryValuesPerNamespace). A tenant names as many clusters, and
// kinds, as it likes: only a bound per namespace bounds anything.
type namespacePool struct {
	namespace string
	max       int64
	// events paces the events of a watch pool's streams (see
	// watchEventRate); nil for a discovery pool.
	events *rate.Limiter

	mu   sync.Mutex
	used int64
	// slowedAt is when a stream of the pool was last logged as slowed.
	slowedAt time.Time
}

// slowedLogEvery spaces the log lines that say a namespace's watches are
// read more slowly than their servers send.
const slowedLogEvery = time.Minute

// slowed reports whether a slowed stream of the pool is to be logged: at
// most once every slowedLogEvery.
func (p *namespacePool) slowed(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.slowedAt) < slowedLogEvery {
		return false
	}
	p.slowedAt = now
	return true
}

// resize changes what one holder counts from from to to, and reports
// whether the pool has room for it; shrinking always does.
func (p *namespacePool) resize(from, to int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if to > from && p.used+to-from > p.max {
		return false
	}
	p.used += to - from
	return true
}

// inUse returns what the pool counts now.
func (p *namespacePool) inUse() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// listSlot returns the slot of namespace's informers (see listsOnly). A
// list is bounded, but a tenant chooses how many kinds its clusters list,
// and each list is held whole, decoded, before it is cached.
func (g *Guard) listSlot(namespace string) *listSlot {
	g.mu.Lock()
	defer g.mu.Unlock()
	return perNamespace(&g.slots, namespace, func() *listSlot { return &listSlot{held: make(chan struct{}, 1)} })
}

// perNamespace returns (*m)[namespace], made by mk the first time. The
// guard's lock is held.
func perNamespace[T any](m *map[string]T, namespace string, mk func() T) T {
	if *m == nil {
		*m = map[string]T{}
	}
	v, ok := (*m)[namespace]
	if !ok {
		v = mk()
		(*m)[namespace] = v
	}
	return v
}

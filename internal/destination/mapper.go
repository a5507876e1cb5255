// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/clock"
)

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

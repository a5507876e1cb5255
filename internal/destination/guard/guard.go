// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Guard applies a Config to the clients of remote destinations.
type Guard struct {
	allowHTTP bool
	deny      []netip.Prefix
	slow      time.Duration
	dialer    *net.Dialer
	resolver  *net.Resolver
	// requests, informers and discovery bound the answers of the request
	// clients, of the informers' clients and of the discovery client;
	// tests make them small.
	requests, informers, discovery answerLimits
	// cacheObjects and cacheBytes bound the caches of one namespace's
	// remote clusters.
	cacheObjects, cacheBytes int64

	mu sync.Mutex
	// slots are the list slots of the namespaces (see listSlot), pools
	// their watch pools (see watchPool).
	slots map[string]*listSlot
	pools map[string]*namespacePool
	// discoveryPools are the discovery pools of the namespaces.
	discoveryPools map[string]*namespacePool
	// poolBytes bounds each watch pool, discoveryValues each discovery
	// pool, eventRate and eventBurst the events of each watch pool; tests
	// make them small.
	poolBytes, discoveryValues int64
	eventRate                  rate.Limit
	eventBurst                 int
	// pause waits for d, or until stop or cancel is closed, and reports
	// whether it waited it out: a watch stream read faster than its pool's
	// events allow waits in it. now is the time the pace is reckoned by.
	// Tests record the waits instead, and stop the clock.
	pause func(d time.Duration, stop, cancel <-chan struct{}) bool
	now   func() time.Time
}

// New returns the guard of g, with the limits of this package's constants
// (limits.go).
func New(g Config) (*Guard, error) {
	deny := g.DenyCIDRs
	if deny == nil {
		deny = DefaultDenyCIDRs()
	}
	for _, p := range deny {
		if !p.IsValid() {
			return nil, fmt.Errorf("destination CIDR deny list: invalid prefix %v", p)
		}
	}
	if g.CacheObjects <= 0 {
		g.CacheObjects = DefaultCacheObjects
	}
	if g.CacheBytes <= 0 {
		g.CacheBytes = DefaultCacheBytes
	}
	return &Guard{
		cacheObjects: g.CacheObjects,
		cacheBytes:   g.CacheBytes,
		allowHTTP:    g.AllowHTTP,
		deny:         deny,
		slow:         g.SlowAnswer,
		// The timeouts of client-go's own dialer.
		dialer:   &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
		resolver: net.DefaultResolver,
		requests: answerLimits{answer: maxAnswerBytes, values: maxAnswerValues,
			event: maxEventBytes, eventValues: maxEventValues, retain: retainedEventBytes, aboutObjects: true},
		informers: answerLimits{answer: maxListBytes, values: maxListValues,
			event: maxEventBytes, eventValues: maxEventValues, retain: retainedEventBytes,
			lists: true, timeout: informerRequestTimeout},
		discovery: answerLimits{answer: maxAnswerBytes, values: maxDiscoveryValues,
			event: maxEventBytes, eventValues: maxEventValues, retain: retainedEventBytes, discovery: true},
		poolBytes:       maxWatchPoolBytes,
		discoveryValues: maxDiscoveryValuesPerNamespace,
		eventRate:       watchEventRate,
		eventBurst:      watchEventBurst,
		pause:           pause,
		now:             time.Now,
	}, nil
}

// pause waits for d, or until stop or cancel is closed, and reports whether
// it waited it out.
func pause(d time.Duration, stop, cancel <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	case <-cancel:
		return false
	}
}

// SlowAnswer is Config.SlowAnswer: zero leaves the caller its default.
func (g *Guard) SlowAnswer() time.Duration { return g.slow }

// CacheBudget returns the objects and bytes the caches of one namespace's
// remote clusters may hold (Config.CacheObjects and CacheBytes, defaulted).
func (g *Guard) CacheBudget() (objects, bytes int64) { return g.cacheObjects, g.cacheBytes }

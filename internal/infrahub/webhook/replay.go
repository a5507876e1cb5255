// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"sync"
	"time"
)

// DefaultReplayEntries is the number of webhook-ids the replay cache holds:
// far more than the deliveries of ten minutes in a busy Infrahub (one per
// artifact change), at some 200 bytes each, under 2 MiB.
const DefaultReplayEntries = 8192

// replayCache remembers the webhook-ids of verified deliveries, per sync,
// until their timestamp leaves the tolerance (after which the timestamp
// check refuses a replay anyway). Only verified deliveries enter it, so no
// one without a shared key can fill it; when full, the oldest entry goes
// first, and a replay of it would cost one wake-up, never content.
type replayCache struct {
	max int

	mu sync.Mutex
	// seen maps a sync's key and a webhook-id to when it may be forgotten.
	seen map[replayKey]time.Time
	// order is a ring of the keys in insertion order; next is where the
	// next one goes.
	order []replayKey
	next  int
}

type replayKey struct{ sync, id string }

func newReplayCache(max int) *replayCache {
	if max <= 0 {
		max = DefaultReplayEntries
	}
	return &replayCache{max: max, seen: map[replayKey]time.Time{}, order: make([]replayKey, 0, 64)}
}

// seenBefore records id for sync with its timestamp ts, and reports
// whether it was recorded already (and is not yet forgettable).
func (c *replayCache) seenBefore(sync, id string, ts, now time.Time) bool {
	k := replayKey{sync: sync, id: id}
	c.mu.Lock()
	defer c.mu.Unlock()
	until := ts.Add(Tolerance)
	if prev, ok := c.seen[k]; ok {
		if now.Before(prev) {
			return true
		}
		// Forgettable, and still in the ring: renewed in its slot.
		c.seen[k] = until
		return false
	}
	if len(c.order) < c.max {
		c.order = append(c.order, k)
	} else {
		delete(c.seen, c.order[c.next])
		c.order[c.next] = k
		c.next = (c.next + 1) % c.max
	}
	c.seen[k] = until
	return false
}

func (c *replayCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

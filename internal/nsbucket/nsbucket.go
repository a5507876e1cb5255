// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package nsbucket

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// sweepEvery is how many takes pass between two sweeps of the full buckets.
const sweepEvery = 1024

// Buckets is a token bucket per namespace, each refilled at the same rate up
// to the same burst. It is safe for concurrent use.
type Buckets struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	takes   int
}

// New returns buckets refilled at perSecond tokens a second, holding burst
// at most.
func New(perSecond float64, burst int) *Buckets {
	return &Buckets{limit: rate.Limit(perSecond), burst: burst, buckets: map[string]*rate.Limiter{}}
}

// Allow takes a token of namespace's bucket at now, and reports whether
// there was one.
func (b *Buckets) Allow(namespace string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bucket(namespace, now).AllowN(now, 1)
}

// Reserve takes a token of namespace's bucket at now, owed if none is left,
// and returns how long until it is there: zero within the burst.
func (b *Buckets) Reserve(namespace string, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bucket(namespace, now).ReserveN(now, 1).DelayFrom(now)
}

// Len returns how many namespaces have a bucket that is not full.
func (b *Buckets) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.buckets)
}

// bucket returns namespace's bucket, made full if it has none. Every
// sweepEvery takes, it first drops the full buckets: a full bucket is the
// same as a new one.
func (b *Buckets) bucket(namespace string, now time.Time) *rate.Limiter {
	b.takes++
	if b.takes%sweepEvery == 0 {
		for ns, lim := range b.buckets {
			if lim.TokensAt(now) >= float64(b.burst) {
				delete(b.buckets, ns)
			}
		}
	}
	lim := b.buckets[namespace]
	if lim == nil {
		lim = rate.NewLimiter(b.limit, b.burst)
		b.buckets[namespace] = lim
	}
	return lim
}

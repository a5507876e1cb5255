// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"math"
	"sync/atomic"
)

// Histogram is a snapshot of a distribution of durations the registry
// records, in the shape of a Prometheus histogram (cumulative buckets, count
// and sum), so that a collector such as package promcollector reports it
// while the registry itself depends on no metrics library.
type Histogram struct {
	// Buckets maps each bucket's upper bound, in seconds, to the number of
	// observations at or below it.
	Buckets map[float64]uint64
	// Count is the number of observations; Sum their total, in seconds.
	Count uint64
	Sum   float64
}

// histogram records observations in exponential buckets without a lock.
type histogram struct {
	upper   []float64
	counts  []atomic.Uint64 // per bucket, the last one above every bound
	count   atomic.Uint64
	sumBits atomic.Uint64 // math.Float64bits of the sum
}

// newHistogram returns a histogram of n buckets whose upper bounds start at
// start and grow by factor.
func newHistogram(start, factor float64, n int) *histogram {
	h := &histogram{upper: make([]float64, n), counts: make([]atomic.Uint64, n+1)}
	for i := range h.upper {
		h.upper[i] = start
		start *= factor
	}
	return h
}

// Observe records v, in seconds.
func (h *histogram) Observe(v float64) {
	i := 0
	for i < len(h.upper) && v > h.upper[i] {
		i++
	}
	h.counts[i].Add(1)
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			break
		}
	}
	h.count.Add(1)
}

// snapshot returns the histogram's figures. Taken while observations land,
// the count may trail the buckets by those in flight, as with Prometheus's.
func (h *histogram) snapshot() Histogram {
	s := Histogram{Buckets: make(map[float64]uint64, len(h.upper)), Count: h.count.Load(), Sum: math.Float64frombits(h.sumBits.Load())}
	var cum uint64
	for i, u := range h.upper {
		cum += h.counts[i].Load()
		s.Buckets[u] = cum
	}
	return s
}

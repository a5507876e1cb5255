// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"slices"
)

// latencyStat summarises a set of latencies in milliseconds.
type latencyStat struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
	Min float64 `json:"min"`
}

// stats uses the nearest-rank percentile: with 200 samples p99 is the
// 198th smallest and p90 the 180th (with 60, p99 would be the maximum, one
// hiccup of a shared machine). Every figure is a latency that was
// measured, with no interpolation to explain.
func stats(ms []float64) latencyStat {
	if len(ms) == 0 {
		return latencyStat{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	return latencyStat{P50: percentile(s, 50), P90: percentile(s, 90), P99: percentile(s, 99), Max: s[len(s)-1], Min: s[0]}
}

func percentile(sorted []float64, p float64) float64 {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

func round(v float64, digits int) float64 {
	f := math.Pow(10, float64(digits))
	return math.Round(v*f) / f
}

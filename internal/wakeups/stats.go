// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeups

import (
	"math"
	"slices"
	"time"
)

// Timing is the rhythm of a stream, from the gaps between its kept
// request times.
type Timing struct {
	// Period is the median gap: robust against a missed or an extra
	// request, which a mean is not.
	Period time.Duration
	// Jitter is the median absolute deviation of the gaps from Period.
	Jitter time.Duration
	// Burstiness is (σ-μ)/(σ+μ) of the gaps: -1 strictly periodic, 0
	// random (Poisson), towards 1 bursts and silences.
	Burstiness float64
	// Gaps is how many gaps were measured; Quick how many were under a
	// second.
	Gaps, Quick int
}

// Periodic tells a rhythm with a period: at least three gaps, a period of
// at least a millisecond, and jitter within a quarter of it.
func (t Timing) Periodic() bool {
	return t.Gaps >= 3 && t.Period >= time.Millisecond && t.Jitter*4 <= t.Period
}

// timing measures sorted times.
func timing(ts []int64) Timing {
	if len(ts) < 2 {
		return Timing{}
	}
	gaps := make([]int64, 0, len(ts)-1)
	var sum, sq float64
	quick := 0
	for i := 1; i < len(ts); i++ {
		g := ts[i] - ts[i-1]
		gaps = append(gaps, g)
		sum += float64(g)
		sq += float64(g) * float64(g)
		if g < int64(time.Second) {
			quick++
		}
	}
	n := float64(len(gaps))
	mean := sum / n
	sd := math.Sqrt(math.Max(0, sq/n-mean*mean))
	burst := 0.0
	if sd+mean > 0 {
		burst = (sd - mean) / (sd + mean)
	}
	med := median(gaps)
	dev := make([]int64, len(gaps))
	for i, g := range gaps {
		dev[i] = max(g-med, med-g)
	}
	return Timing{
		Period:     time.Duration(med),
		Jitter:     time.Duration(median(dev)),
		Burstiness: math.Round(burst*100) / 100,
		Gaps:       len(gaps),
		Quick:      quick,
	}
}

// median of xs, which it sorts.
func median(xs []int64) int64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// near tells two periods within a quarter of each other.
func near(a, b time.Duration) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return a > 0 && b > 0 && d*4 <= max(a, b)
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"testing"

	"github.com/vidra-operator/vidra/internal/testenv"
)

func buckets(counts map[string]float64) testenv.Metrics {
	var m testenv.Metrics = map[string][]testenv.Sample{}
	for le, n := range counts {
		m["h_bucket"] = append(m["h_bucket"], testenv.Sample{Labels: map[string]string{"le": le}, Value: n})
	}
	return m
}

// The p99 of the observations between two scrapes interpolates within the
// bucket that holds it, and is undefined without an observation.
func TestP99OfBucketDeltas(t *testing.T) {
	q := query{metric: "h_bucket", kind: "p99"}
	prev := buckets(map[string]float64{"0.1": 10, "1": 10, "+Inf": 10})
	// 100 new observations: 50 under 0.1, 50 between 0.1 and 1.
	cur := buckets(map[string]float64{"0.1": 60, "1": 110, "+Inf": 110})
	want := 0.1 + 0.9*(99.0-50)/50
	if got := p99(q, prev, cur); math.Abs(got-want) > 1e-9 {
		t.Errorf("p99 = %v, want %v", got, want)
	}
	if got := p99(q, cur, cur); !math.IsNaN(got) {
		t.Errorf("p99 without observations = %v, want NaN", got)
	}
}

// A counter's rate is per second between scrapes, and a reset counts from
// zero instead of going negative.
func TestRateSurvivesACounterReset(t *testing.T) {
	sample := func(v float64) testenv.Metrics {
		return map[string][]testenv.Sample{"c_total": {{Labels: map[string]string{"trigger": "event"}, Value: v}}}
	}
	p := panel{queries: []query{{metric: "c_total", by: "trigger", kind: "rate"}}}
	lines := evaluate(p, []scrape{{0, sample(10)}, {5, sample(20)}, {10, sample(3)}})
	if len(lines) != 1 || lines[0].legend != "event" {
		t.Fatalf("lines = %+v", lines)
	}
	got := lines[0].values
	if !math.IsNaN(got[0]) || got[1] != 2 || got[2] != 0.6 {
		t.Errorf("rates = %v, want [NaN 2 0.6]", got)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHistogramCountsCumulativeBuckets(t *testing.T) {
	h := newHistogram(1, 2, 3) // bounds 1, 2, 4
	for _, v := range []float64{0.5, 1, 1.5, 3, 10} {
		h.Observe(v)
	}
	want := Histogram{Buckets: map[float64]uint64{1: 2, 2: 3, 4: 4}, Count: 5, Sum: 16}
	if diff := cmp.Diff(want, h.snapshot()); diff != "" {
		t.Fatalf("snapshot (-want +got):\n%s", diff)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakequeue

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// The pacing of a resource is dropped when the resource is, and otherwise
// once it has run its course, so that it does not grow with every
// resource ever woken.
func TestHealthPacingIsDropped(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	p := NewPacer()
	for i := range 1000 {
		p.Wake(cache.ObjectName{Namespace: "ns", Name: fmt.Sprint(i)}, true, clk.Now())
	}
	p.Forget(cache.ObjectName{Namespace: "ns", Name: "0"})
	if n := len(p.keys); n != 999 {
		t.Fatalf("%d resources paced after one of 1000 was forgotten", n)
	}
	clk.Step(HealthEvery)
	for range 24 {
		p.Wake(cache.ObjectName{Namespace: "ns", Name: "busy"}, false, clk.Now())
	}
	if n := len(p.keys); n != 1 {
		t.Errorf("%d resources paced a second after their last change, want the one still changing", n)
	}
}

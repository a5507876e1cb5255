// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestTriggerAttributionWhenCausesArePending checks which cause a reconcile
// is counted under when several are recorded for one key: the most
// significant one that is due, with every due cause consumed and a cause due
// later kept for its own reconcile.
func TestTriggerAttributionWhenCausesArePending(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "vr"}
	type pending struct {
		trigger Trigger
		in      time.Duration
	}
	for _, tc := range []struct {
		name    string
		pending []pending
		want    Trigger
		// left are the causes still recorded afterwards.
		left []Trigger
	}{
		{name: "event and interval both due: the event", pending: []pending{{TriggerInterval, 0}, {TriggerEvent, 0}}, want: TriggerEvent},
		{name: "event due, interval later: the event, the interval kept", pending: []pending{{TriggerInterval, time.Minute}, {TriggerEvent, 0}}, want: TriggerEvent, left: []Trigger{TriggerInterval}},
		{name: "requested not due yet: the event, the request kept", pending: []pending{{TriggerInterval, 0}, {TriggerEvent, 0}, {TriggerRequested, time.Second}}, want: TriggerEvent, left: []Trigger{TriggerRequested}},
		{name: "requested beats everything", pending: []pending{{TriggerRetry, 0}, {TriggerEvent, 0}, {TriggerRequested, 0}}, want: TriggerRequested},
		{name: "retry beats interval", pending: []pending{{TriggerInterval, 0}, {TriggerRetry, 0}}, want: TriggerRetry},
		{name: "nothing due: an event (a queue add without a record)", pending: []pending{{TriggerInterval, time.Minute}}, want: TriggerEvent, left: []Trigger{TriggerInterval}},
		{name: "nothing recorded", want: TriggerEvent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
			c := &Controller{clock: clk, triggers: map[cache.ObjectName]map[Trigger]pendingTrigger{}, lastTrigger: map[cache.ObjectName]Trigger{}}
			for _, p := range tc.pending {
				c.addTrigger(key, p.trigger, clk.Now().Add(p.in))
			}
			if got := c.takeTrigger(key, clk.Now()); got != tc.want {
				t.Errorf("takeTrigger = %q, want %q", got, tc.want)
			}
			var left []Trigger
			for _, tr := range triggerOrder {
				if _, ok := c.triggers[key][tr]; ok {
					left = append(left, tr)
				}
			}
			if len(left) != len(tc.left) {
				t.Fatalf("left recorded %v, want %v", left, tc.left)
			}
			for i := range left {
				if left[i] != tc.left[i] {
					t.Fatalf("left recorded %v, want %v", left, tc.left)
				}
			}
			if len(tc.left) == 0 {
				if _, ok := c.triggers[key]; ok {
					t.Errorf("an empty record of %s is kept", key)
				}
			}
		})
	}
}

// TestCauseRecordedWhileTheKeyIsHandedOutIsKeptForTheNextRun is a wake that
// lands between the queue handing a key to a worker and the worker reading
// its causes: the queue runs the key again for it, and that run, not the
// one already under way, is counted under it. A second run whose cause the
// first took counts under the first's trigger, not as an event.
func TestCauseRecordedWhileTheKeyIsHandedOutIsKeptForTheNextRun(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "vr"}
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	c := &Controller{clock: clk, triggers: map[cache.ObjectName]map[Trigger]pendingTrigger{}, lastTrigger: map[cache.ObjectName]Trigger{}}

	c.addTrigger(key, TriggerInterval, clk.Now())
	got := clk.Now()
	clk.Step(time.Millisecond)
	c.addTrigger(key, TriggerHealth, clk.Now())
	if tr := c.takeTrigger(key, got); tr != TriggerInterval {
		t.Fatalf("the run under way was counted as %q, want %q", tr, TriggerInterval)
	}
	if tr := c.takeTrigger(key, clk.Now()); tr != TriggerHealth {
		t.Fatalf("the next run was counted as %q, want %q", tr, TriggerHealth)
	}

	// The health cause was recorded before the key was handed out, but
	// the queue, told after, runs the key once more: that run has no cause
	// of its own left.
	c.addTrigger(key, TriggerHealth, clk.Now())
	if tr := c.takeTrigger(key, clk.Now()); tr != TriggerHealth {
		t.Fatalf("counted as %q, want %q", tr, TriggerHealth)
	}
	if tr := c.takeTrigger(key, clk.Now()); tr != TriggerHealth {
		t.Fatalf("a second run whose cause the first took was counted as %q, want %q", tr, TriggerHealth)
	}
}

// A resource that is gone leaves nothing behind for its name: no recorded
// cause, and no queue entry due later than a day, whatever its interval.
func TestAGoneResourceLeavesNoCauseAndNoDistantQueueEntry(t *testing.T) {
	f := newFixture(t, nil)
	c := f.newController()
	key := cache.ObjectName{Namespace: operatorNS, Name: "gone"}
	c.enqueueAfter(key, TriggerInterval, 2_000_000*time.Hour)
	c.mu.Lock()
	due := c.triggers[key][TriggerInterval].due
	c.mu.Unlock()
	if limit := c.clock.Now().Add(maxQueueDelay); due.After(limit) {
		t.Errorf("queued for %s, want at most %s from now", due, maxQueueDelay)
	}
	c.forget(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.triggers[key]; ok {
		t.Errorf("causes of a forgotten resource still recorded: %v", m)
	}
}

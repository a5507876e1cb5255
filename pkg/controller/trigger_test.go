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
			c := &Controller{clock: clk, triggers: map[cache.ObjectName]map[Trigger]time.Time{}}
			for _, p := range tc.pending {
				c.addTrigger(key, p.trigger, clk.Now().Add(p.in))
			}
			if got := c.takeTrigger(key); got != tc.want {
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

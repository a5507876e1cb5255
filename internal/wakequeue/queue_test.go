// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakequeue

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

func newTestQueue(t *testing.T) (*Queue, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	q := New(Options{Clock: clk})
	t.Cleanup(q.ShutDown)
	return q, clk
}

// TestTriggerAttributionWhenCausesArePending checks which cause a reconcile
// is counted under when several are recorded for one key: the most
// significant one that is due, with every due cause consumed and a cause due
// later kept for its own reconcile.
func TestTriggerAttributionWhenCausesArePending(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "vr"}
	type cause struct {
		trigger Trigger
		in      time.Duration
	}
	for _, tc := range []struct {
		name    string
		pending []cause
		want    Trigger
		// left are the causes still recorded afterwards.
		left []Trigger
	}{
		{name: "event and interval both due: the event", pending: []cause{{TriggerInterval, 0}, {TriggerEvent, 0}}, want: TriggerEvent},
		{name: "event due, interval later: the event, the interval kept", pending: []cause{{TriggerInterval, time.Minute}, {TriggerEvent, 0}}, want: TriggerEvent, left: []Trigger{TriggerInterval}},
		{name: "requested not due yet: the event, the request kept", pending: []cause{{TriggerInterval, 0}, {TriggerEvent, 0}, {TriggerRequested, time.Second}}, want: TriggerEvent, left: []Trigger{TriggerRequested}},
		{name: "requested beats everything", pending: []cause{{TriggerRetry, 0}, {TriggerEvent, 0}, {TriggerRequested, 0}}, want: TriggerRequested},
		{name: "retry beats interval", pending: []cause{{TriggerInterval, 0}, {TriggerRetry, 0}}, want: TriggerRetry},
		{name: "nothing due: an event (a queue add without a record)", pending: []cause{{TriggerInterval, time.Minute}}, want: TriggerEvent, left: []Trigger{TriggerInterval}},
		{name: "nothing recorded", want: TriggerEvent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, clk := newTestQueue(t)
			for _, p := range tc.pending {
				q.record(key, p.trigger, clk.Now().Add(p.in))
			}
			if got, _ := q.Take(Item{Key: key, Got: clk.Now()}); got != tc.want {
				t.Errorf("Take = %q, want %q", got, tc.want)
			}
			var left []Trigger
			for _, tr := range order {
				if _, ok := q.Due(key, tr); ok {
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
			if _, ok := q.triggers[key]; len(tc.left) == 0 && ok {
				t.Errorf("an empty record of %s is kept", key)
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
	q, clk := newTestQueue(t)
	take := func(got time.Time) Trigger {
		tr, _ := q.Take(Item{Key: key, Got: got})
		return tr
	}

	q.record(key, TriggerInterval, clk.Now())
	got := clk.Now()
	clk.Step(time.Millisecond)
	q.record(key, TriggerHealth, clk.Now())
	if tr := take(got); tr != TriggerInterval {
		t.Fatalf("the run under way was counted as %q, want %q", tr, TriggerInterval)
	}
	if tr := take(clk.Now()); tr != TriggerHealth {
		t.Fatalf("the next run was counted as %q, want %q", tr, TriggerHealth)
	}

	// The health cause was recorded before the key was handed out, but
	// the queue, told after, runs the key once more: that run has no cause
	// of its own left.
	q.record(key, TriggerHealth, clk.Now())
	if tr := take(clk.Now()); tr != TriggerHealth {
		t.Fatalf("counted as %q, want %q", tr, TriggerHealth)
	}
	if tr := take(clk.Now()); tr != TriggerHealth {
		t.Fatalf("a second run whose cause the first took was counted as %q, want %q", tr, TriggerHealth)
	}
}

// TestRetryIsCountedAsARetryWhenItComesLate is a retry's attribution: the
// key comes back after the backoff, and a reconcile woken by something else
// meanwhile must not take the retry's cause, leaving the late re-add to be
// counted as an event.
func TestRetryIsCountedAsARetryWhenItComesLate(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "vr"}
	q, clk := newTestQueue(t)

	q.Retry(key)
	// A person asks for a reconcile before the backoff is over.
	q.record(key, TriggerRequested, clk.Now())
	if got, _ := q.Take(Item{Key: key, Got: clk.Now()}); got != TriggerRequested {
		t.Fatalf("the requested reconcile was counted as %q", got)
	}
	clk.Step(time.Second)
	if got, _ := q.Take(Item{Key: key, Got: clk.Now()}); got != TriggerRetry {
		t.Fatalf("the retry after the backoff was counted as %q, want %q", got, TriggerRetry)
	}
}

// TestRetriesBackOffFrom200msDoubling: each failure in a row puts the next
// try of the key off twice as long as the last, from 200ms. The retry is
// recorded as due then, and the queue hands the key out when the clock
// reaches it.
func TestRetriesBackOffFrom200msDoubling(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "vr"}
	q, clk := newTestQueue(t)
	// The delaying queue's heartbeat; a key put off adds the timer of its
	// due time.
	idle := clk.Waiters()
	for n, want := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond} {
		q.Retry(key)
		due, _ := q.Due(key, TriggerRetry)
		if got := due.Sub(clk.Now()); got != want {
			t.Fatalf("failure %d: retry due in %v, want %v", n+1, got, want)
		}
		// Stepped before the queue set its timer, the clock would leave
		// that timer a step late.
		if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			return clk.Waiters() > idle, nil
		}); err != nil {
			t.Fatalf("failure %d: the queue never waited for the retry's due time", n+1)
		}
		clk.Step(want)
		it := getWithin(t, q)
		if it.Key != key {
			t.Fatalf("failure %d: the queue handed out %v, want %v", n+1, it.Key, key)
		}
		if got, _ := q.Take(it); got != TriggerRetry {
			t.Errorf("failure %d: the try after the backoff was counted as %q, want %q", n+1, got, TriggerRetry)
		}
		q.Done(it)
	}
}

// A key queued far ahead waits a day at most; dropped, it leaves no cause
// behind.
func TestADistantKeyWaitsADayAtMostAndDropLeavesNoCause(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "gone"}
	q, clk := newTestQueue(t)
	q.AddAfter(key, TriggerInterval, 2_000_000*time.Hour)
	due, _ := q.Due(key, TriggerInterval)
	if limit := clk.Now().Add(MaxDelay); due.After(limit) {
		t.Errorf("queued for %s, want at most %s from now", due, MaxDelay)
	}
	q.PutOff(key, TriggerStartup)
	if got := q.Drop(key); got != TriggerStartup {
		t.Errorf("Drop = %q, want the most significant cause, %q", got, TriggerStartup)
	}
	if len(q.triggers) != 0 || len(q.last) != 0 || len(q.putOff) != 0 {
		t.Errorf("a dropped key left causes %v, last %v, put off %v", q.triggers, q.last, q.putOff)
	}
}

// A key put off runs next time without being put off again.
func TestAKeyPutOffIsPutOffOnce(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "vr"}
	q, _ := newTestQueue(t)
	q.PutOff(key, TriggerStartup)
	it := getWithin(t, q)
	if tr, putOff := q.Take(it); tr != TriggerStartup || !putOff {
		t.Fatalf("Take = %q, put off %v; want startup, put off", tr, putOff)
	}
	q.Done(it)
	q.Add(key, TriggerStartup)
	it = getWithin(t, q)
	if _, putOff := q.Take(it); putOff {
		t.Error("the next run of the key is marked put off too")
	}
}

// getWithin returns the next item q hands out, failing the test if none
// comes within wait.ForeverTestTimeout.
func getWithin(t *testing.T, q *Queue) Item {
	t.Helper()
	got := make(chan Item, 1)
	go func() {
		// ShutDown, at the test's end, ends a Get still waiting.
		if it, ok := q.Get(); ok {
			got <- it
		}
	}()
	select {
	case it := <-got:
		return it
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("the queue handed nothing out")
		return Item{}
	}
}

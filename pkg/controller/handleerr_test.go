// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestEveryRetryIsRateLimitedAndOnlyKeysWithAnIntervalAreDropped covers the
// requeue decisions after a reconcile: conflicts back off like any error,
// and a key is given up to its interval only when it has one, so that a
// deletion (which has none) is never dropped after the retry cap.
func TestEveryRetryIsRateLimitedAndOnlyKeysWithAnIntervalAreDropped(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "vr"}
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "vidraresources"}, "vr", errors.New("stale"))
	failed := errors.New("cleanup failed")
	for _, tc := range []struct {
		name string
		// failures are the reconciles that failed before this one.
		failures     int
		res          syncResult
		err          error
		wantRequeues int
	}{
		{name: "success forgets the failures", failures: 3, res: syncResult{requeueAfter: time.Minute}, wantRequeues: 0},
		{name: "a conflict backs off", failures: 0, err: conflict, wantRequeues: 1},
		{name: "a conflict past the cap still backs off", failures: 5, err: conflict, wantRequeues: 6},
		{name: "an error backs off", failures: 1, err: failed, wantRequeues: 2},
		{name: "past the cap with an interval: given up until the interval", failures: 5, res: syncResult{requeueAfter: time.Minute, requeueTrigger: TriggerInterval}, err: failed, wantRequeues: 0},
		{name: "past the cap without an interval (a deletion): never dropped", failures: 5, err: failed, wantRequeues: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
			opts := Options{Clock: clk, MaxRetries: 5}
			queue, limiter := newQueue(newFairQueue(), opts)
			c := &Controller{queue: queue, limiter: limiter, opts: opts, clock: clk, triggers: map[cache.ObjectName]map[Trigger]pendingTrigger{}, lastTrigger: map[cache.ObjectName]Trigger{}}
			defer c.queue.ShutDown()
			for range tc.failures {
				c.queue.AddRateLimited(key)
			}
			c.handleErr(t.Context(), key, tc.res, tc.err)
			if got := c.queue.NumRequeues(key); got != tc.wantRequeues {
				t.Errorf("retries recorded = %d, want %d", got, tc.wantRequeues)
			}
		})
	}
}

// TestRetryIsCountedAsARetryWhenItComesLate is a retry's attribution: the
// key comes back after the backoff, and a reconcile woken by something else
// meanwhile must not take the retry's cause, leaving the late re-add to be
// counted as an event.
func TestRetryIsCountedAsARetryWhenItComesLate(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "vr"}
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	opts := Options{Clock: clk, MaxRetries: 5}
	queue, limiter := newQueue(newFairQueue(), opts)
	c := &Controller{queue: queue, limiter: limiter, opts: opts, clock: clk, triggers: map[cache.ObjectName]map[Trigger]pendingTrigger{}, lastTrigger: map[cache.ObjectName]Trigger{}}
	defer c.queue.ShutDown()

	c.handleErr(t.Context(), key, syncResult{}, errors.New("failed"))
	// A person asks for a reconcile before the backoff is over.
	c.addTrigger(key, TriggerRequested, clk.Now())
	if got := c.takeTrigger(key, clk.Now()); got != TriggerRequested {
		t.Fatalf("the requested reconcile was counted as %q", got)
	}
	clk.Step(time.Second)
	if got := c.takeTrigger(key, clk.Now()); got != TriggerRetry {
		t.Fatalf("the retry after the backoff was counted as %q, want %q", got, TriggerRetry)
	}
}

// TestRetriesBackOffFrom200msDoubling: each failure in a row puts the next
// try of the key off twice as long as the last, from 200ms. The retry is
// recorded as due then, and the queue hands the key out when the clock
// reaches it.
func TestRetriesBackOffFrom200msDoubling(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "vr"}
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	opts := Options{Clock: clk, MaxRetries: 20}
	queue, limiter := newQueue(newFairQueue(), opts)
	c := &Controller{queue: queue, limiter: limiter, opts: opts, clock: clk, triggers: map[cache.ObjectName]map[Trigger]pendingTrigger{}, lastTrigger: map[cache.ObjectName]Trigger{}}
	defer c.queue.ShutDown()
	// The delaying queue's heartbeat; a key put off adds the timer of its
	// due time.
	idle := clk.Waiters()
	for n, want := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond} {
		c.handleErr(t.Context(), key, syncResult{}, errors.New("failed"))
		c.mu.Lock()
		due := c.triggers[key][TriggerRetry].due
		c.mu.Unlock()
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
		if got := getWithin(t, c.queue); got != key {
			t.Fatalf("failure %d: the queue handed out %v, want %v", n+1, got, key)
		}
		if got := c.takeTrigger(key, clk.Now()); got != TriggerRetry {
			t.Errorf("failure %d: the try after the backoff was counted as %q, want %q", n+1, got, TriggerRetry)
		}
		c.queue.Done(key)
	}
}

// getWithin returns the next key q hands out, failing the test if none
// comes within wait.ForeverTestTimeout.
func getWithin(t *testing.T, q workqueue.TypedRateLimitingInterface[cache.ObjectName]) cache.ObjectName {
	t.Helper()
	got := make(chan cache.ObjectName, 1)
	go func() {
		// ShutDown, deferred by the caller, ends a Get still waiting.
		if k, shutdown := q.Get(); !shutdown {
			got <- k
		}
	}()
	select {
	case k := <-got:
		return k
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("the queue handed nothing out")
		return cache.ObjectName{}
	}
}

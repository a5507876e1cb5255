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

func keyIn(ns string, i int) cache.ObjectName {
	return cache.ObjectName{Namespace: ns, Name: fmt.Sprintf("vr-%d", i)}
}

// TestBacklogOfOneNamespaceDoesNotDelayAnother is the starvation a shared
// FIFO allows: 50 keys of one tenant queued ahead of another's key. Through
// the real work queue, the other namespace's key is handed out second.
func TestBacklogOfOneNamespaceDoesNotDelayAnother(t *testing.T) {
	q := New(Options{Clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0))})
	defer q.ShutDown()
	for i := range 50 {
		q.Add(keyIn("noisy", i), TriggerEvent)
	}
	q.Add(keyIn("quiet", 0), TriggerEvent)
	var got []cache.ObjectName
	for range 2 {
		it, _ := q.Get()
		got = append(got, it.Key)
	}
	if got[0].Namespace != "noisy" || got[1] != keyIn("quiet", 0) {
		t.Fatalf("first two keys handed out = %v, want one of noisy's, then quiet/vr-0", got)
	}
	if n := q.Len(); n != 49 {
		t.Errorf("queue length = %d, want 49", n)
	}
}

// TestNamespaceWithReconcilesInFlightYieldsToOneWithout: while workers are
// busy with one namespace's keys, a key of a namespace with none in flight
// goes first, even if that namespace came later in the rotation.
func TestNamespaceWithReconcilesInFlightYieldsToOneWithout(t *testing.T) {
	q := newFairQueue()
	for i := range 10 {
		q.Push(keyIn("busy", i))
	}
	var running []cache.ObjectName
	for range 4 {
		running = append(running, q.Pop())
	}
	for i := range 5 {
		q.Push(keyIn("busy", 10+i))
	}
	q.Push(keyIn("idle", 0))
	if k := q.Pop(); k != keyIn("idle", 0) {
		t.Fatalf("Pop = %v, want idle/vr-0 (busy has %d in flight)", k, len(running))
	}
	// Once busy's reconciles finish, it is served again, oldest first.
	for _, k := range running {
		q.finished(k)
	}
	q.finished(keyIn("idle", 0))
	if k := q.Pop(); k != keyIn("busy", 4) {
		t.Fatalf("Pop = %v, want busy/vr-4", k)
	}
	if len(q.inflight) != 1 || q.inflight["busy"] != 1 {
		t.Errorf("in flight = %v, want busy:1 alone", q.inflight)
	}
}

func TestFairQueueRotatesNamespacesAndForgetsEmptyOnes(t *testing.T) {
	q := newFairQueue()
	for i := range 2 {
		for _, ns := range []string{"a", "b", "c"} {
			q.Push(keyIn(ns, i))
		}
	}
	var order []string
	for q.Len() > 0 {
		k := q.Pop()
		order = append(order, k.String())
		q.finished(k)
	}
	want := "[a/vr-0 b/vr-0 c/vr-0 a/vr-1 b/vr-1 c/vr-1]"
	if got := fmt.Sprint(order); got != want {
		t.Errorf("order = %s, want %s", got, want)
	}
	if len(q.queues) != 0 || len(q.order) != 0 || len(q.inflight) != 0 {
		t.Errorf("state left behind: queues %v, order %v, in flight %v", q.queues, q.order, q.inflight)
	}
}

// TestRetryBudgetIsPerNamespace: one namespace spending its retry burst
// does not make another's first retry wait. The buckets refill by the
// queue's clock, which stands still here: a retry owed a token waits for
// exactly the refill of one.
func TestRetryBudgetIsPerNamespace(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	l := newNamespaceBucketLimiter(clk, 1, 5)
	for i := range 5 {
		if d := l.When(keyIn("noisy", i)); d != 0 {
			t.Fatalf("retry %d within the burst waits %v", i, d)
		}
	}
	if d := l.When(keyIn("noisy", 5)); d != time.Second {
		t.Errorf("retry past the burst waits %v, want 1s: the next token", d)
	}
	if d := l.When(keyIn("quiet", 0)); d != 0 {
		t.Errorf("another namespace's first retry waits %v, want none", d)
	}
	// A second on, the token owed has come and gone to the retry that
	// waited for it: the next waits a second again, no less, no more.
	clk.Step(time.Second)
	if d := l.When(keyIn("noisy", 6)); d != time.Second {
		t.Errorf("retry a second later waits %v, want 1s", d)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package reliability_test

import (
	"context"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

// leaseArgs shorten the lease so that a crashed leader is replaced within
// seconds; the defaults (15 s, 10 s, 2 s) suit production, not a test.
var leaseArgs = []string{
	"--leader-elect",
	"--leader-elect-lease-duration=4s",
	"--leader-elect-renew-deadline=3s",
	"--leader-elect-retry-period=500ms",
}

// TestLeaderFailover measures the time from the leader's stop to the
// standby's first reconcile: with SIGTERM the leader releases its lease and
// the standby takes over at its next retry; with SIGKILL the standby must
// wait for the lease to expire. Either way the new leader then corrects
// drift. The times are printed; the bounds are an order of magnitude above
// what is expected, to stay robust on a loaded machine.
func TestLeaderFailover(t *testing.T) {
	for _, tc := range []struct {
		name   string
		signal syscall.Signal
		bound  time.Duration
	}{
		{"SIGTERM releases the lease", syscall.SIGTERM, 15 * time.Second},
		{"SIGKILL waits for the lease to expire", syscall.SIGKILL, 45 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t)
			leader := startOperator(t, ns, leaseArgs...)
			waitLeading(t, leader)
			createResources(t, ns, 3)
			waitConverged(t, ns, 3, 2*time.Minute)
			standby := startOperator(t, ns, leaseArgs...)
			// The barrier: the standby has read the Lease and seen another
			// replica lead.
			err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				_, ok := standby.logTime("Leader elected")
				return ok, nil
			})
			if err != nil {
				t.Fatalf("the standby never saw the leader: %v", err)
			}
			m, err := standby.Metrics(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if n := m.Sum("vidra_reconciles_total", nil); n != 0 {
				t.Fatalf("the standby reconciled %v times while the other replica led", n)
			}
			holders := watchLeaseHolders(t, ns)

			stopped := time.Now()
			if err := leader.Signal(tc.signal); err != nil {
				t.Fatal(err)
			}
			var first time.Time
			err = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, tc.bound, true, func(ctx context.Context) (bool, error) {
				if standby.metric(ctx, "vidra_reconciles_total", nil) > 0 {
					first = time.Now()
					return true, nil
				}
				return false, nil
			})
			if err != nil {
				t.Fatalf("the standby did not reconcile within %s of the leader's %s: %v", tc.bound, tc.name, err)
			}
			exit := leader.Wait(30 * time.Second)
			if tc.signal == syscall.SIGTERM && exit != nil {
				t.Errorf("the leader did not exit cleanly on SIGTERM: %v", exit)
			}
			// Released: the Lease's holder was emptied before the standby
			// took it. Killed: it was not, and the standby waited for it to
			// expire.
			seen := holders()
			released := slices.Index(seen, "")
			taken := slices.IndexFunc(seen, func(h string) bool { return h != "" && h != seen[0] })
			switch {
			case taken < 0:
				t.Errorf("the standby never took the Lease over: holders %q", seen)
			case tc.signal == syscall.SIGTERM && (released < 0 || released > taken):
				t.Errorf("the leader did not release its Lease on SIGTERM before the standby took it: holders %q", seen)
			case tc.signal == syscall.SIGKILL && released >= 0 && released < taken:
				t.Errorf("a killed leader released its Lease?: holders %q", seen)
			}
			acquired, ok := standby.logTime("Became the leader")
			lease := "not logged"
			if ok {
				lease = acquired.Sub(stopped).Round(time.Millisecond).String()
			}
			t.Logf("%s: leader stopped → standby leads after %s → first reconcile observed on its /metrics after %s (10 ms polls)",
				tc.name, lease, first.Sub(stopped).Round(time.Millisecond))

			deleteConfigMap(t, ns, resourceName(0))
			took := waitRestored(t, "ConfigMap deleted after the failover", 30*time.Second, configMapExists(ns, resourceName(0)))
			t.Logf("the new leader restored a deleted ConfigMap in %s", took.Round(time.Millisecond))
		})
	}
}

// waitLeading waits until op reconciles as the leader.
func waitLeading(t *testing.T, op *operator) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		_, ok := op.logTime("Became the leader")
		return ok, nil
	})
	if err != nil {
		t.Fatalf("pid %d did not become the leader: %v", op.PID(), err)
	}
}

// watchLeaseHolders watches the leader Lease of namespace from its current
// version, and returns a func that stops the watch and returns the holder of
// each version seen, the current one first ("" for a released Lease).
func watchLeaseHolders(t *testing.T, namespace string) func() []string {
	t.Helper()
	leases := kube.CoordinationV1().Leases(namespace)
	cur, err := leases.Get(t.Context(), "vidra-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := leases.Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=vidra-leader", ResourceVersion: cur.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	holders := []string{holderOf(cur)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if l, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type == watch.Modified {
				mu.Lock()
				if h := holderOf(l); h != holders[len(holders)-1] {
					holders = append(holders, h)
				}
				mu.Unlock()
			}
		}
	}()
	stop := sync.OnceValue(func() []string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(holders)
	})
	t.Cleanup(func() { stop() })
	return stop
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

package reliability_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
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
			if n := standby.metric(t.Context(), "vidra_reconciles_total", nil); n != 0 {
				t.Fatalf("the standby reconciled %v times while the other replica led", n)
			}

			stopped := time.Now()
			if err := leader.Signal(tc.signal); err != nil {
				t.Fatal(err)
			}
			var first time.Time
			err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, tc.bound, true, func(ctx context.Context) (bool, error) {
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

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package reliability_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestOperatorRecoversFromAPIServerRestart kills kube-apiserver under a
// running operator and starts it again. The operator must not restart: the
// same process reconnects its watches and corrects drift made right after
// the API server came back, before its watches were re-established (seen
// only through the relist), and then drift made once everything reconnected
// (seen through the new watches).
func TestOperatorRecoversFromAPIServerRestart(t *testing.T) {
	ns := namespace(t)
	op := startOperator(t, ns)
	createResources(t, ns, 5)
	waitConverged(t, ns, 5, 2*time.Minute)
	pid := op.PID()

	// The outage lasts until the operator has seen it: its watches (one per
	// kind of managed object, and those of VidraResources and of its
	// configuration) end with their connections, and each one's next
	// attempt cannot connect, a request client-go counts as "<error>".
	failed := func(ctx context.Context) float64 {
		return op.metric(ctx, "rest_client_requests_total", map[string]string{"code": "<error>"})
	}
	watches := op.metric(t.Context(), "vidra_watchregistry_informers_running", nil) + 2
	failedBefore := failed(t.Context())
	env.StopAPIServer()
	down := time.Now()
	var n float64
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n = failed(ctx) - failedBefore
		return n >= watches, nil
	})
	if err != nil {
		t.Fatalf("with kube-apiserver down, the operator had %.0f failed requests, want one for each of its %.0f watches at least: %v", n, watches, err)
	}
	t.Logf("the operator had %.0f failed requests %s after kube-apiserver stopped (%.0f watches)", n, time.Since(down).Round(time.Millisecond), watches)
	if err := env.StartAPIServer(t.Context()); err != nil {
		t.Fatalf("restart kube-apiserver: %v", err)
	}
	t.Logf("kube-apiserver was down for %s", time.Since(down).Round(time.Millisecond))

	// Drift at once, while the operator's watches are still backing off.
	deleteConfigMap(t, ns, resourceName(0))
	scaleDeployment(t, ns, resourceName(1), 2)
	cm := waitRestored(t, "ConfigMap deleted right after the restart", 2*time.Minute, configMapExists(ns, resourceName(0)))
	dep := waitRestored(t, "Deployment scaled right after the restart", 2*time.Minute, deploymentScaledToZero(ns, resourceName(1)))
	t.Logf("drift made right after the restart repaired (watch back-off included): the deleted ConfigMap within %s, the scaled Deployment within %s",
		cm.Round(time.Millisecond), (cm + dep).Round(time.Millisecond))

	// Drift once everything is connected again: now a watch event reports it.
	deleteConfigMap(t, ns, resourceName(2))
	again := waitRestored(t, "ConfigMap deleted after the reconnect", 30*time.Second, configMapExists(ns, resourceName(2)))
	t.Logf("drift after the reconnect repaired in %s", again.Round(time.Millisecond))

	if !op.Alive() || op.PID() != pid {
		t.Fatalf("the operator did not survive the API server restart (pid %d, alive %t)", pid, op.Alive())
	}
	waitConverged(t, ns, 5, time.Minute)
}

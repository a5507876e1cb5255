// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller"
)

// The local control plane runs no deployment controller and no kubelet: a
// Deployment's health is whatever status a test writes to it, as the
// deployment controller would have.

const (
	pauseImage    = "registry.k8s.io/pause:3.10"
	newPauseImage = "registry.k8s.io/pause:3.9"
)

// deploymentOf is a Deployment of one replica running image.
func deploymentOf(name, image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
        - name: app
          image: %[2]s
`, name, image)
}

// transitioned is the lastTransitionTime of the conditions the tests write:
// only lastUpdateTime moves when a condition is refreshed.
var transitioned = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func deploymentCondition(typ, status, reason, message string, updated time.Time) map[string]any {
	return map[string]any{
		"type": typ, "status": status, "reason": reason, "message": message,
		"lastUpdateTime": updated.UTC().Format(time.RFC3339), "lastTransitionTime": transitioned.Format(time.RFC3339),
	}
}

func specReplicas(d *unstructured.Unstructured) int64 {
	n, found, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	if !found {
		return 1
	}
	return n
}

// rolledOut is the status the deployment controller writes once every
// replica of d's generation is available; updated is the conditions'
// lastUpdateTime, which kstatus ignores.
func rolledOut(d *unstructured.Unstructured, updated time.Time) map[string]any {
	n := specReplicas(d)
	return map[string]any{
		"observedGeneration": d.GetGeneration(),
		"replicas":           n, "updatedReplicas": n, "readyReplicas": n, "availableReplicas": n,
		"conditions": []any{
			deploymentCondition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.", updated),
			deploymentCondition("Progressing", "True", "NewReplicaSetAvailable",
				fmt.Sprintf("ReplicaSet %q has successfully progressed.", d.GetName()), updated),
		},
	}
}

// available is rolledOut now.
func available(d *unstructured.Unstructured) map[string]any { return rolledOut(d, time.Now()) }

// progressDeadlineExceeded is the status of a rollout that gave up: its
// Pods never became available within spec.progressDeadlineSeconds.
func progressDeadlineExceeded(d *unstructured.Unstructured) map[string]any {
	n := specReplicas(d)
	now := time.Now()
	return map[string]any{
		"observedGeneration": d.GetGeneration(),
		"replicas":           n, "updatedReplicas": n, "unavailableReplicas": n,
		"conditions": []any{
			deploymentCondition("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.", now),
			deploymentCondition("Progressing", "False", "ProgressDeadlineExceeded",
				fmt.Sprintf("ReplicaSet %q has timed out progressing.", d.GetName()), now),
		},
	}
}

// writeDeploymentStatus replaces the status of Deployment ns/name with
// what status computes from it, through the status subresource, and
// returns the Deployment as written.
func writeDeploymentStatus(t *testing.T, ns, name string, status func(*unstructured.Unstructured) map[string]any) *unstructured.Unstructured {
	t.Helper()
	var out *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := dyn.Resource(deployments).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Object["status"] = status(d)
		out, err = dyn.Resource(deployments).Namespace(ns).UpdateStatus(t.Context(), d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("write the status of Deployment %s/%s: %v", ns, name, err)
	}
	return out
}

// managedEntry returns the inventory entry of kind/name, or nil.
func managedEntry(vr *v1alpha1.VidraResource, kind, name string) *v1alpha1.ManagedResource {
	for i, m := range vr.Status.ManagedResources {
		if m.Kind == kind && m.Name == name {
			return &vr.Status.ManagedResources[i]
		}
	}
	return nil
}

// entryHealth matches a resource whose inventory entry of kind/name has
// health h, for the current generation.
func entryHealth(kind, name, h string) func(*v1alpha1.VidraResource) bool {
	return func(vr *v1alpha1.VidraResource) bool {
		m := managedEntry(vr, kind, name)
		return m != nil && m.Health == h && vr.Status.ObservedGeneration == vr.Generation
	}
}

// allOf matches a resource every cond matches.
func allOf(conds ...func(*v1alpha1.VidraResource) bool) func(*v1alpha1.VidraResource) bool {
	return func(vr *v1alpha1.VidraResource) bool {
		for _, c := range conds {
			if !c(vr) {
				return false
			}
		}
		return true
	}
}

// conditionOf returns condition typ of vr, failing the test without it.
func conditionOf(t *testing.T, vr *v1alpha1.VidraResource, typ string) *metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(vr.Status.Conditions, typ)
	if c == nil {
		t.Fatalf("%s/%s has no %s condition: %+v", vr.Namespace, vr.Name, typ, vr.Status.Conditions)
	}
	return c
}

// metricSum sums the samples of the operator's metric family whose labels
// contain every pair of match; found says whether any sample matched.
func metricSum(t *testing.T, family string, match map[string]string) (sum float64, found bool) {
	t.Helper()
	mfs, err := metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
	samples:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range match {
				if labels[k] != v {
					continue samples
				}
			}
			found = true
			sum += m.GetCounter().GetValue()
		}
	}
	return sum, found
}

func TestHealthOfEachObjectIsReportedOnTheParent(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "app", docs(configMap("settings", map[string]string{"a": "1"}), deploymentOf("web", pauseImage)))
	// Without spec.wait, Ready means applied and in sync, whatever the
	// health.
	vr := waitVR(t, ns, "app", "reported the Deployment in progress",
		allOf(isReady, hasCondition(v1alpha1.ConditionHealthy, metav1.ConditionFalse, v1alpha1.ReasonProgressing)))
	if m := managedEntry(vr, "ConfigMap", "settings"); m == nil || m.Health != "Current" || m.HealthMessage != "" {
		t.Errorf("ConfigMap entry = %+v, want Current without a message", m)
	}
	if m := managedEntry(vr, "Deployment", "web"); m == nil || m.Health != "InProgress" || m.HealthMessage == "" {
		t.Errorf("Deployment entry = %+v, want InProgress with a message", m)
	}
	if c := conditionOf(t, vr, v1alpha1.ConditionHealthy); !strings.Contains(c.Message, "Deployment "+ns+"/web is InProgress") {
		t.Errorf("Healthy message %q does not name the Deployment", c.Message)
	}

	before := reconciled(t, ns, "app")
	writeDeploymentStatus(t, ns, "web", available)
	vr = waitVR(t, ns, "app", "reported every object healthy",
		allOf(isReady, hasCondition(v1alpha1.ConditionHealthy, metav1.ConditionTrue, v1alpha1.ReasonAllCurrent), entryHealth("Deployment", "web", "Current")))
	if m := managedEntry(vr, "Deployment", "web"); m.HealthMessage != "" {
		t.Errorf("Deployment entry = %+v, want no message once Current", m)
	}
	waitCount(t, ns, "app", "a reconcile woken by health", func(by map[controller.Trigger]int) bool {
		return by[controller.TriggerHealth] > before[controller.TriggerHealth]
	})
	after := reconciled(t, ns, "app")
	if after[controller.TriggerHealth] != before[controller.TriggerHealth]+1 || after[controller.TriggerEvent] != before[controller.TriggerEvent] {
		t.Errorf("reconciles before the rollout %v, after %v: want exactly one more woken by health, none by event", before, after)
	}
	if n, found := metricSum(t, "vidra_reconciles_total", map[string]string{"trigger": string(controller.TriggerHealth)}); !found || n < 1 {
		t.Errorf(`vidra_reconciles_total{trigger="health"} = %v (found %v), want at least 1`, n, found)
	}
}

// A Deployment's controller refreshes its status without changing what it
// says (a condition's lastUpdateTime): the watch registry's health digest
// stays the same, and the owner is not woken.
func TestHealthKeepingStatusChurnWakesNothing(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "app", deploymentOf("web", pauseImage))
	waitReady(t, ns, "app")
	dep := writeDeploymentStatus(t, ns, "web", func(d *unstructured.Unstructured) map[string]any { return rolledOut(d, transitioned) })
	waitVR(t, ns, "app", "reported the Deployment healthy", hasCondition(v1alpha1.ConditionHealthy, metav1.ConditionTrue, v1alpha1.ReasonAllCurrent))
	before := reconciled(t, ns, "app")

	parent, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(t.Context(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := vidra.InfrahubV1alpha1().VidraResources(ns).Watch(t.Context(), metav1.ListOptions{
		FieldSelector: "metadata.name=app", ResourceVersion: parent.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// Each update starts from the previous one's answer, so that a write of
	// anyone else in between (Vidra's) makes it fail with a conflict.
	client := dyn.Resource(deployments).Namespace(ns)
	const churn = 100
	for i := 1; i <= churn; i++ {
		dep.Object["status"] = rolledOut(dep, transitioned.Add(time.Duration(i)*time.Second))
		next, err := client.UpdateStatus(t.Context(), dep, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("status update %d: %v", i, err)
		}
		if next.GetResourceVersion() == dep.GetResourceVersion() {
			t.Fatalf("status update %d changed nothing", i)
		}
		dep = next
	}
	// The barrier: an update that changes the health. Events of one
	// informer are handled in order, so once it has woken the owner every
	// update before it has been handled.
	st := rolledOut(dep, transitioned.Add((churn+1)*time.Second))
	st["availableReplicas"] = int64(0)
	dep.Object["status"] = st
	dep, err = client.UpdateStatus(t.Context(), dep, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("the status update that changes health: %v", err)
	}

	// The parent's status is written once, for the barrier.
	writes := 0
	deadline := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of the parent ended")
			}
			vr, isVR := ev.Object.(*v1alpha1.VidraResource)
			if ev.Type != watch.Modified || !isVR {
				t.Fatalf("unexpected watch event %s: %v", ev.Type, ev.Object)
			}
			writes++
			done = entryHealth("Deployment", "web", "InProgress")(vr)
			if done {
				if c := conditionOf(t, vr, v1alpha1.ConditionHealthy); c.Reason != v1alpha1.ReasonProgressing || !strings.Contains(c.Message, "Available: 0/1") {
					t.Errorf("Healthy = %+v, want Progressing on Available: 0/1", c)
				}
			}
		case <-deadline:
			t.Fatalf("the parent never reported the Deployment InProgress; %d writes seen", writes)
		}
	}
	if writes != 1 {
		t.Errorf("the parent was written %d times during the churn, want once", writes)
	}

	waitCount(t, ns, "app", "a reconcile woken by health", func(by map[controller.Trigger]int) bool {
		return by[controller.TriggerHealth] > before[controller.TriggerHealth]
	})
	after := reconciled(t, ns, "app")
	if after[controller.TriggerHealth] != before[controller.TriggerHealth]+1 || after[controller.TriggerEvent] != before[controller.TriggerEvent] {
		t.Errorf("reconciles before the churn %v, after %v: want exactly one more woken by health across %d status updates, none by event",
			before, after, churn+1)
	}
	// Neither the churn nor the reconcile it caused made Vidra write the
	// Deployment.
	cur, err := client.Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cur.GetResourceVersion() != dep.GetResourceVersion() {
		t.Errorf("the Deployment moved from resourceVersion %s (the last status update) to %s", dep.GetResourceVersion(), cur.GetResourceVersion())
	}
}

func TestWaitMakesReadyMeanHealthy(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "app", deploymentOf("web", pauseImage), func(vr *v1alpha1.VidraResource) { vr.Spec.Wait = true })
	vr := waitVR(t, ns, "app", "waited for the Deployment", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressing))
	if c := conditionOf(t, vr, v1alpha1.ConditionReady); !strings.Contains(c.Message, "Deployment "+ns+"/web is InProgress") {
		t.Errorf("Ready message %q does not name the Deployment", c.Message)
	}
	if c := conditionOf(t, vr, v1alpha1.ConditionReconciling); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonProgressing {
		t.Errorf("Reconciling = %+v, want True Progressing", c)
	}
	if vr.Status.HealthCheckStartTime == nil {
		t.Error("healthCheckStartTime not set while waiting")
	}
	// A later reconcile still waits: nothing made the Deployment healthy.
	reconciled(t, ns, "app")
	waitVR(t, ns, "app", "still waited", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressing))

	writeDeploymentStatus(t, ns, "web", available)
	vr = waitReady(t, ns, "app")
	if c := conditionOf(t, vr, v1alpha1.ConditionReady); !strings.Contains(c.Message, "healthy") {
		t.Errorf("Ready message %q does not say the objects are healthy", c.Message)
	}
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionStalled); c != nil {
		t.Errorf("Stalled = %+v once Ready", c)
	}
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReconciling); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("Reconciling = %+v once Ready", c)
	}
}

// A failed object fails the wait at once: no timeout can help it.
func TestWaitFailsAtOnceWhenAnObjectFailed(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "app", deploymentOf("web", pauseImage), func(vr *v1alpha1.VidraResource) { vr.Spec.Wait = true })
	waitVR(t, ns, "app", "waited for the Deployment", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressing))
	before := reconciled(t, ns, "app")

	writeDeploymentStatus(t, ns, "web", progressDeadlineExceeded)
	// spec.timeout is the default, 5m: far beyond waitVR's minute.
	vr := waitVR(t, ns, "app", "failed the health check",
		allOf(hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonHealthCheckFailed),
			hasCondition(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonHealthCheckFailed),
			hasCondition(v1alpha1.ConditionHealthy, metav1.ConditionFalse, v1alpha1.ReasonDegraded)))
	if c := conditionOf(t, vr, v1alpha1.ConditionReady); !strings.Contains(c.Message, "Deployment "+ns+"/web is Failed") {
		t.Errorf("Ready message %q does not name the failed Deployment", c.Message)
	}
	if m := managedEntry(vr, "Deployment", "web"); m == nil || m.Health != "Failed" {
		t.Errorf("Deployment entry = %+v, want Failed", m)
	}
	waitCount(t, ns, "app", "a reconcile woken by health", func(by map[controller.Trigger]int) bool {
		return by[controller.TriggerHealth] > before[controller.TriggerHealth]
	})
}

// The timeout is a deadline the controller requeues the resource for, not a
// poll: with the interval off, nothing else would look at it again.
func TestWaitTimesOutAtItsDeadline(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "app", deploymentOf("web", pauseImage), func(vr *v1alpha1.VidraResource) {
		vr.Spec.Wait = true
		vr.Spec.Timeout = &metav1.Duration{Duration: 2 * time.Second}
		vr.Spec.Interval = &metav1.Duration{}
	})
	vr := waitVR(t, ns, "app", "failed the health check", allOf(
		hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonHealthCheckFailed),
		hasCondition(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonHealthCheckFailed)))
	ready := conditionOf(t, vr, v1alpha1.ConditionReady)
	if !strings.Contains(ready.Message, "Not healthy within 2s") || !strings.Contains(ready.Message, "Deployment "+ns+"/web is InProgress") {
		t.Errorf("Ready message %q does not say the timeout passed and why", ready.Message)
	}
	// Stalled turned True when the wait failed (Ready was False all
	// along). Both times are to the second, the start rounded down.
	stalled := conditionOf(t, vr, v1alpha1.ConditionStalled)
	if start := vr.Status.HealthCheckStartTime; start == nil || stalled.LastTransitionTime.Before(&metav1.Time{Time: start.Add(2 * time.Second)}) {
		t.Errorf("failed at %v, before the deadline of a wait started at %v", stalled.LastTransitionTime, start)
	}
	waitCount(t, ns, "app", "the deadline's reconcile, woken by health", func(by map[controller.Trigger]int) bool {
		return by[controller.TriggerHealth] > 0
	})

	// A late rollout still makes it Ready.
	writeDeploymentStatus(t, ns, "web", available)
	vr = waitReady(t, ns, "app")
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionStalled); c != nil {
		t.Errorf("Stalled = %+v once Ready", c)
	}
	if by, _ := reconciles.of(ns, "app"); by[controller.TriggerInterval] > 0 {
		t.Errorf("reconciles = %v, want none by interval", by)
	}
}

// waitClockPast waits until the clock reads after ts. Status times have a
// precision of a second: a test that must tell two of them apart lets the
// second pass.
func waitClockPast(t *testing.T, ts time.Time) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return time.Now().After(ts), nil
	})
	if err != nil {
		t.Fatalf("the clock never passed %v: %v", ts, err)
	}
}

func TestWaitRestartsWhenTheManifestChanges(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "app", deploymentOf("web", pauseImage), func(vr *v1alpha1.VidraResource) { vr.Spec.Wait = true })
	waitVR(t, ns, "app", "waited for the Deployment", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressing))
	writeDeploymentStatus(t, ns, "web", available)
	first := waitReady(t, ns, "app").Status.HealthCheckStartTime
	if first == nil {
		t.Fatal("healthCheckStartTime not set")
	}

	waitClockPast(t, first.Add(time.Second))
	updateVR(t, ns, "app", func(vr *v1alpha1.VidraResource) { vr.Spec.Manifest = deploymentOf("web", newPauseImage) })
	// The Deployment's controller has not observed its new generation yet.
	vr := waitVR(t, ns, "app", "waited for the new rollout", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressing))
	if start := vr.Status.HealthCheckStartTime; start == nil || !start.After(first.Time) {
		t.Errorf("healthCheckStartTime = %v, want after the first wait's %v", start, first)
	}
	if m := managedEntry(vr, "Deployment", "web"); m == nil || m.Health != "InProgress" {
		t.Errorf("Deployment entry = %+v, want InProgress", m)
	}

	d := writeDeploymentStatus(t, ns, "web", available)
	if d.GetGeneration() != 2 {
		t.Errorf("Deployment generation %d, want 2", d.GetGeneration())
	}
	waitReady(t, ns, "app")
}

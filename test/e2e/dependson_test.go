// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller"
)

// dependsOn makes a resource depend on others of its namespace and turns
// its interval off: only a dependency's change may wake it.
func dependsOn(names ...string) func(*v1alpha1.VidraResource) {
	return func(vr *v1alpha1.VidraResource) {
		for _, n := range names {
			vr.Spec.DependsOn = append(vr.Spec.DependsOn, v1alpha1.DependencyReference{Name: n})
		}
		vr.Spec.Interval = &metav1.Duration{}
	}
}

// assertAbsent fails if ConfigMap ns/name exists. Call it after a barrier
// that proves whatever would have created it has run.
func assertAbsent(t *testing.T, ns, name string) {
	t.Helper()
	_, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
	switch {
	case err == nil:
		t.Errorf("ConfigMap %s/%s was applied", ns, name)
	case !apierrors.IsNotFound(err):
		t.Fatal(err)
	}
}

// assertBlocked checks the Ready condition and the inventory of a resource
// that its dependencies keep from applying.
func assertBlocked(t *testing.T, vr *v1alpha1.VidraResource, reason string, fragments ...string) {
	t.Helper()
	c := conditionOf(t, vr, v1alpha1.ConditionReady)
	if c.Status != metav1.ConditionFalse || c.Reason != reason {
		t.Errorf("%s/%s Ready = %s %s, want False %s", vr.Namespace, vr.Name, c.Status, c.Reason, reason)
	}
	for _, f := range fragments {
		if !strings.Contains(c.Message, f) {
			t.Errorf("%s/%s Ready message %q does not contain %q", vr.Namespace, vr.Name, c.Message, f)
		}
	}
	if len(vr.Status.ManagedResources) > 0 {
		t.Errorf("%s/%s manages %+v while blocked", vr.Namespace, vr.Name, vr.Status.ManagedResources)
	}
	if h := conditionOf(t, vr, v1alpha1.ConditionHealthy); h.Status != metav1.ConditionUnknown || h.Reason != v1alpha1.ReasonNothingApplied {
		t.Errorf("%s/%s Healthy = %s %s while blocked before applying anything, want Unknown %s", vr.Namespace, vr.Name, h.Status, h.Reason, v1alpha1.ReasonNothingApplied)
	}
}

func TestDependsOnAppliesNothingUntilTheDependencyIsReady(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "b", configMap("b-settings", nil), dependsOn("a"))
	vr := waitVR(t, ns, "b", "waited for its dependency", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDependencyNotReady))
	assertBlocked(t, vr, v1alpha1.ReasonDependencyNotReady, "VidraResource "+ns+"/a does not exist")
	before := reconciled(t, ns, "b")
	assertAbsent(t, ns, "b-settings")

	createVR(t, ns, "a", configMap("a-settings", nil))
	waitReady(t, ns, "a")
	waitReady(t, ns, "b")
	waitObject(t, configMaps, ns, "b-settings", "exists", exists)
	// Ready is written before the reconcile is counted: the barrier is
	// counted after it.
	if by := reconciled(t, ns, "b"); by[controller.TriggerDependency] <= before[controller.TriggerDependency] || by[controller.TriggerInterval] > 0 {
		t.Errorf("reconciles of b before %v, after %v: want more woken by dependency, none by interval", before, by)
	}
}

// A dependency that stays not Ready but changes why is told to its
// dependents: their message must not keep an earlier reason ("not reconciled
// yet") for as long as they wait.
func TestDependentsMessageFollowsTheDependencysReason(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "b", configMap("b-settings", nil), dependsOn("a"))
	waitVR(t, ns, "b", "waited for its dependency", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDependencyNotReady))
	createVR(t, ns, "a", strings.Replace(configMap("a-settings", nil), "metadata:\n", "metadata:\n  namespace: "+ns+"-missing\n", 1))
	waitVR(t, ns, "a", "failed on its missing namespace", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNamespaceNotFound))
	vr := waitVR(t, ns, "b", "named the dependency's reason", func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && strings.Contains(c.Message, "VidraResource "+ns+"/a is not Ready ("+v1alpha1.ReasonNamespaceNotFound+")")
	})
	assertBlocked(t, vr, v1alpha1.ReasonDependencyNotReady)
}

// With spec.wait, a dependency is Ready once healthy: its dependents wait
// for its rollout.
func TestDependsOnWaitsForTheDependencysHealth(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "a", deploymentOf("db", pauseImage), func(vr *v1alpha1.VidraResource) { vr.Spec.Wait = true })
	waitVR(t, ns, "a", "waited for its Deployment", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressing))
	createVR(t, ns, "b", configMap("b-settings", nil), dependsOn("a"))
	vr := waitVR(t, ns, "b", "waited for its dependency", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDependencyNotReady))
	assertBlocked(t, vr, v1alpha1.ReasonDependencyNotReady, "VidraResource "+ns+"/a is not Ready (Progressing)")
	before := reconciled(t, ns, "b")
	assertAbsent(t, ns, "b-settings")

	writeDeploymentStatus(t, ns, "db", available)
	waitReady(t, ns, "a")
	waitReady(t, ns, "b")
	waitObject(t, configMaps, ns, "b-settings", "exists", exists)
	if by := reconciled(t, ns, "b"); by[controller.TriggerDependency] <= before[controller.TriggerDependency] {
		t.Errorf("reconciles of b before %v, after %v: want more woken by dependency", before, by)
	}
}

func TestDependencyCycleStallsEveryMember(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "a", configMap("a-settings", nil), dependsOn("b"))
	createVR(t, ns, "b", configMap("b-settings", nil), dependsOn("a"))
	for _, name := range []string{"a", "b"} {
		vr := waitVR(t, ns, name, "stalled on the cycle", allOf(
			hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDependencyCycle),
			hasCondition(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonDependencyCycle)))
		assertBlocked(t, vr, v1alpha1.ReasonDependencyCycle, ns+"/a", ns+"/b")
		if vr.Status.DeployState != v1alpha1.DeployStateFailed {
			t.Errorf("%s deployState = %s, want %s", name, vr.Status.DeployState, v1alpha1.DeployStateFailed)
		}
	}
	for _, name := range []string{"a", "b"} {
		reconciled(t, ns, name)
		assertAbsent(t, ns, name+"-settings")
	}
}

// The e2e operator runs without --allow-cross-namespace-dependencies: a
// resource may not even learn whether another namespace's resource is
// Ready.
func TestDependencyInAnotherNamespaceIsRefused(t *testing.T) {
	ns, other := namespace(t), namespace(t)
	createVR(t, other, "a", configMap("a-settings", nil))
	waitReady(t, other, "a")
	createVR(t, ns, "b", configMap("b-settings", nil), func(vr *v1alpha1.VidraResource) {
		vr.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "a", Namespace: other}}
	})
	vr := waitVR(t, ns, "b", "refused its dependency", allOf(
		hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDependencyRefused),
		hasCondition(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonDependencyRefused)))
	assertBlocked(t, vr, v1alpha1.ReasonDependencyRefused, other+"/a", "--allow-cross-namespace-dependencies")
	reconciled(t, ns, "b")
	assertAbsent(t, ns, "b-settings")
}

// Each link of a chain is woken by its dependency becoming Ready, with no
// interval to fall back on: the chain becomes Ready from its root out.
func TestDependencyChainBecomesReadyInOrder(t *testing.T) {
	ns := namespace(t)
	const depth = 5
	name := func(i int) string { return fmt.Sprintf("r%d", i) }

	list, err := vidra.InfrahubV1alpha1().VidraResources(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := vidra.InfrahubV1alpha1().VidraResources(ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// The dependents first, each blocked, then the root.
	before := map[string]map[controller.Trigger]int{}
	for i := depth; i >= 2; i-- {
		createVR(t, ns, name(i), configMap(name(i)+"-settings", nil), dependsOn(name(i-1)))
	}
	for i := 2; i <= depth; i++ {
		waitVR(t, ns, name(i), "waited for its dependency", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDependencyNotReady))
		before[name(i)] = reconciled(t, ns, name(i))
		assertAbsent(t, ns, name(i)+"-settings")
	}
	createVR(t, ns, name(1), configMap(name(1)+"-settings", nil), func(vr *v1alpha1.VidraResource) { vr.Spec.Interval = &metav1.Duration{} })

	// Watch events come in the order of the writes.
	var order []string
	deadline := time.After(60 * time.Second)
	for len(order) < depth {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended; Ready so far: %v", order)
			}
			vr, isVR := ev.Object.(*v1alpha1.VidraResource)
			if !isVR || ev.Type == watch.Deleted {
				t.Fatalf("unexpected watch event %s: %v", ev.Type, ev.Object)
			}
			if isReady(vr) && !slices.Contains(order, vr.Name) {
				order = append(order, vr.Name)
			}
		case <-deadline:
			t.Fatalf("the chain never became Ready; Ready so far: %v", order)
		}
	}
	if want := []string{"r1", "r2", "r3", "r4", "r5"}; !slices.Equal(order, want) {
		t.Errorf("became Ready in the order %v, want %v", order, want)
	}
	for i := 2; i <= depth; i++ {
		waitObject(t, configMaps, ns, name(i)+"-settings", "exists", exists)
		by := reconciled(t, ns, name(i))
		b := before[name(i)]
		// A wake that comes before the informer has seen the status the
		// previous reconcile wrote meets a conflict and is retried: retries
		// are no sign of polling, an interval would be.
		if by[controller.TriggerDependency] <= b[controller.TriggerDependency] || by[controller.TriggerEvent] != b[controller.TriggerEvent] ||
			by[controller.TriggerInterval] > 0 {
			t.Errorf("reconciles of %s while blocked %v, after %v: want more woken by dependency, none by event or interval", name(i), b, by)
		}
	}
}

// While a change of a resource waits for a dependency, the resource is not
// waiting for health: the wait of the new generation starts when it is
// applied, not when the previous generation's did.
func TestWaitOfAChangeHeldByADependencyStartsWhenApplied(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "a", configMap("a-settings", nil), func(vr *v1alpha1.VidraResource) { vr.Spec.Interval = &metav1.Duration{} })
	waitReady(t, ns, "a")
	createVR(t, ns, "b", deploymentOf("web", pauseImage), dependsOn("a"), func(vr *v1alpha1.VidraResource) {
		vr.Spec.Wait = true
		vr.Spec.Timeout = &metav1.Duration{Duration: 2 * time.Second}
	})
	first := waitVR(t, ns, "b", "timed out", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonHealthCheckFailed)).Status.HealthCheckStartTime
	if first == nil {
		t.Fatal("healthCheckStartTime not set")
	}

	// a stops being Ready; b's change waits for it, longer than b's timeout.
	updateVR(t, ns, "a", func(vr *v1alpha1.VidraResource) { vr.Spec.Manifest = "apiVersion: v1\nmetadata:\n  name: x\n" })
	waitVR(t, ns, "a", "rejected its manifest", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidManifest))
	updateVR(t, ns, "b", func(vr *v1alpha1.VidraResource) { vr.Spec.Manifest = deploymentOf("web", newPauseImage) })
	waitVR(t, ns, "b", "held its change", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDependencyNotReady))
	waitClockPast(t, first.Add(3*time.Second))

	updateVR(t, ns, "a", func(vr *v1alpha1.VidraResource) { vr.Spec.Manifest = configMap("a-settings", nil) })
	waitReady(t, ns, "a")
	vr := waitVR(t, ns, "b", "applied its change", func(vr *v1alpha1.VidraResource) bool {
		return hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressing)(vr) ||
			hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonHealthCheckFailed)(vr)
	})
	start := vr.Status.HealthCheckStartTime
	if start == nil || !start.After(first.Add(2*time.Second)) {
		t.Fatalf("healthCheckStartTime = %v after the change was applied, want a new wait after the first one's (%v) timed out; Ready = %+v",
			start, first, conditionOf(t, vr, v1alpha1.ConditionReady))
	}
	writeDeploymentStatus(t, ns, "web", available)
	waitReady(t, ns, "b")
}

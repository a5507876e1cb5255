// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller"
)

// TestTurningEventsBackOnRechecksResources: an object deleted while
// eventBasedReconcile was off has nothing to wake its resource (no event
// handled, no interval here); turning events back on must re-check it.
func TestTurningEventsBackOnRechecksResources(t *testing.T) {
	ns := namespace(t)
	setConfig(t, map[string]string{"eventBasedReconcile": "false"})
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return !vidraOp.Config.Current().EventBased, nil
	})
	if err != nil {
		t.Fatalf("eventBasedReconcile=false never applied: %+v", vidraOp.Config.Current())
	}
	noInterval := func(vr *v1alpha1.VidraResource) { vr.Spec.Interval = &metav1.Duration{} }
	createVR(t, ns, "events-off", configMap("eo", nil), noInterval)
	// The barrier: its own reconcileOnEvents overrides the configuration,
	// and its ConfigMap shares the informer of eo, whose events are
	// handled in order.
	createVR(t, ns, "events-on", configMap("barrier", nil), noInterval, func(vr *v1alpha1.VidraResource) {
		vr.Spec.Destination.ReconcileOnEvents = ptr.To(true)
	})
	waitReady(t, ns, "events-off")
	waitReady(t, ns, "events-on")
	before := reconciled(t, ns, "events-off")
	barrierCM := waitObject(t, configMaps, ns, "barrier", "exists", exists)

	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "eo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "barrier", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Once the barrier's ConfigMap is back, the deletion of eo has been
	// handled, and would have queued its resource before the barrier's.
	waitObject(t, configMaps, ns, "barrier", "was restored past the barrier", func(o *unstructured.Unstructured) bool {
		return o.GetUID() != barrierCM.GetUID()
	})
	if _, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "eo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("ConfigMap eo was restored with eventBasedReconcile=false (err %v); the test would prove nothing", err)
	}
	if by, _ := reconciles.of(ns, "events-off"); by[controller.TriggerEvent] != before[controller.TriggerEvent] {
		t.Fatalf("events-off was woken by an event with eventBasedReconcile=false: reconciles %v, %v before", by, before)
	}

	setConfig(t, map[string]string{"eventBasedReconcile": "true"})
	waitObject(t, configMaps, ns, "eo", "was restored once events were back on", exists)
	// The configuration change queues the resources that now correct drift
	// on events, as a periodic re-check would: the restore is counted so,
	// and no event woke it.
	waitCount(t, ns, "events-off", "the re-check the configuration change queued", func(by map[controller.Trigger]int) bool {
		return by[controller.TriggerInterval] > before[controller.TriggerInterval]
	})
	if by, _ := reconciles.of(ns, "events-off"); by[controller.TriggerEvent] != before[controller.TriggerEvent] {
		t.Errorf("reconciles of events-off %v, %v before: the restore was woken by an event, not by the configuration change", by, before)
	}
}

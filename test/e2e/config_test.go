package e2e_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
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
	createVR(t, ns, "events-off", configMap("eo", nil), func(vr *v1alpha1.VidraResource) {
		vr.Spec.Interval = &metav1.Duration{} // off: only the configuration change can wake it
	})
	waitReady(t, ns, "events-off")
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "eo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	setConfig(t, map[string]string{"eventBasedReconcile": "true"})
	waitObject(t, configMaps, ns, "eo", "was restored once events were back on", exists)
}

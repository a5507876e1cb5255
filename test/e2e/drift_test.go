// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller"
)

func TestDeletedConfigMapIsRestored(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "drift", configMap("settings", map[string]string{"a": "1"}))
	waitReady(t, ns, "drift")
	cm := waitObject(t, configMaps, ns, "settings", "exists", exists)
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, configMaps, ns, "settings", "was restored", func(o *unstructured.Unstructured) bool {
		return o.GetUID() != cm.GetUID()
	})
	// A restore is told as drift, not as a new apply.
	waitEvent(t, ns, "drift", "DriftCorrected", "ConfigMap "+ns+"/settings (deleted)")
	events, err := kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=drift,reason=Applied"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		t.Errorf("restore or first apply recorded as an apply: %q (count %d)", e.Message, e.Count)
	}
}

func TestEditedConfigMapDataIsRestored(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "drift", configMap("settings", map[string]string{"a": "1"}))
	waitReady(t, ns, "drift")
	patch := []byte(`{"data":{"a":"hacked","extra":"x"}}`)
	if _, err := kube.CoreV1().ConfigMaps(ns).Patch(t.Context(), "settings", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, configMaps, ns, "settings", "had its data restored", func(o *unstructured.Unstructured) bool {
		d, _, _ := unstructured.NestedStringMap(o.Object, "data")
		_, extra := d["extra"]
		return d["a"] == "1" && !extra
	})
}

func TestLabelAddedToServiceIsRemoved(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "drift", serviceDoc)
	waitReady(t, ns, "drift")
	patch := []byte(`{"metadata":{"labels":{"hand":"made"}}}`)
	if _, err := kube.CoreV1().Services(ns).Patch(t.Context(), "web", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, services, ns, "web", "lost the hand-made label", func(o *unstructured.Unstructured) bool {
		_, ok := o.GetLabels()["hand"]
		return !ok && o.GetLabels()[v1alpha1.ManagedByLabel] == "vidra"
	})
}

func TestEditedDeploymentReplicasAreRestored(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "drift", deploymentDoc)
	waitReady(t, ns, "drift")
	patch := []byte(`{"spec":{"replicas":5}}`)
	if _, err := kube.AppsV1().Deployments(ns).Patch(t.Context(), "web", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, deployments, ns, "web", "got its replicas back", func(o *unstructured.Unstructured) bool {
		r, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
		return r == 2
	})
}

func TestFieldsOfOtherControllersAreLeftAlone(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "share", serviceDoc)
	waitReady(t, ns, "share")
	// A controller (not a person) adds an annotation the manifest does not set.
	patch := []byte(`{"metadata":{"annotations":{"injected.example.com/by":"mesh"}}}`)
	if _, err := kube.CoreV1().Services(ns).Patch(t.Context(), "web", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "mesh-injector"}); err != nil {
		t.Fatal(err)
	}
	updateVR(t, ns, "share", func(vr *v1alpha1.VidraResource) {
		vr.Annotations = map[string]string{v1alpha1.RequestedAtAnnotation: "share-1"}
	})
	waitVR(t, ns, "share", "handled the request", func(vr *v1alpha1.VidraResource) bool { return vr.Status.LastHandledReconcileAt == "share-1" })
	svc, err := kube.CoreV1().Services(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Annotations["injected.example.com/by"] != "mesh" {
		t.Fatalf("a controller's annotation was removed: %v", svc.Annotations)
	}
}

func TestKubectlScaleIsTakenBack(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "scale", deploymentDoc)
	waitReady(t, ns, "scale")
	scale, err := kube.AppsV1().Deployments(ns).GetScale(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scale.Spec.Replicas = 7
	if _, err := kube.AppsV1().Deployments(ns).UpdateScale(t.Context(), "web", scale, metav1.UpdateOptions{FieldManager: "kubectl-scale"}); err != nil {
		t.Fatal(err)
	}
	d := waitObject(t, deployments, ns, "web", "got its replicas back", func(o *unstructured.Unstructured) bool {
		r, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
		return r == 2
	})
	for _, e := range d.GetManagedFields() {
		if e.Manager == "kubectl-scale" {
			t.Errorf("kubectl-scale still owns fields: %s", e.FieldsV1.Raw)
		}
	}
}

// A controller reporting on a managed object writes its status, often; that
// must not wake the object's resource.
func TestStatusOnlyUpdatesCauseNoReconcile(t *testing.T) {
	ns := namespace(t)
	// Created first, the barrier has the informer running when the
	// resource comes, so that its first list does not wake it too.
	b := newBarrier(t, ns, deployments)
	createVR(t, ns, "churn", deploymentDoc)
	waitReady(t, ns, "churn")
	before := reconciled(t, ns, "churn")
	for i := range 50 {
		d, err := kube.AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// A field health does not read: the object's health, and with it
		// the digest the watch registry wakes on, stays the same.
		d.Status.CollisionCount = ptr.To(int32(i + 1))
		if _, err := kube.AppsV1().Deployments(ns).UpdateStatus(t.Context(), d, metav1.UpdateOptions{FieldManager: "fake-controller"}); err != nil {
			t.Fatal(err)
		}
	}
	// The barrier's Deployment, deleted after the churn, is restored only
	// once the same informer has handled every status event before it; a
	// reconcile one of them queued was queued ahead of the barrier's, and
	// the requested reconcile is counted after it.
	b.pass(t)
	after := reconciled(t, ns, "churn")
	for _, tr := range []controller.Trigger{controller.TriggerEvent, controller.TriggerHealth} {
		if after[tr] != before[tr] {
			t.Errorf("status-only updates that keep health caused %d reconciles (%s): by trigger %v before the churn, %v after", after[tr]-before[tr], tr, before, after)
		}
	}
}

// Vidra's own writes reach its watches like anyone's. They must not wake the
// resource that made them: every apply would cost a second reconcile, and a
// write that is not idempotent would loop.
func TestOwnWritesCauseNoLoop(t *testing.T) {
	ns := namespace(t)
	// Created first, the barrier has the informers running when the
	// resource comes, so that their first lists do not wake it too.
	b := newBarrier(t, ns, configMaps, services, deployments)
	createVR(t, ns, "quiet", docs(configMap("a", map[string]string{"k": "1"}), serviceDoc, deploymentDoc))
	waitReady(t, ns, "quiet")
	// The barrier passes once the informers have handled the events of the
	// creations; the requested reconcile is counted after any reconcile
	// they queued.
	b.pass(t)
	converged := reconciled(t, ns, "quiet")
	if n := converged[controller.TriggerEvent]; n != 1 {
		t.Errorf("%d event-driven reconciles to create the objects, want 1, the resource's creation (by trigger %v): own creations are feeding back", n, converged)
	}

	// Converged, it stays quiet: a reconcile writes nothing, and nothing
	// wakes it.
	objects := []struct {
		gvr      schema.GroupVersionResource
		name, rv string
	}{{gvr: configMaps, name: "a"}, {gvr: services, name: "web"}, {gvr: deployments, name: "web"}}
	for i, o := range objects {
		objects[i].rv = waitObject(t, o.gvr, ns, o.name, "exists", exists).GetResourceVersion()
	}
	b.pass(t)
	after := reconciled(t, ns, "quiet")
	if n := after[controller.TriggerEvent] - converged[controller.TriggerEvent]; n != 0 {
		t.Errorf("%d event-driven reconciles of a converged resource (by trigger %v, then %v): own writes are feeding back", n, converged, after)
	}
	for _, o := range objects {
		if cur := waitObject(t, o.gvr, ns, o.name, "exists", exists); cur.GetResourceVersion() != o.rv {
			t.Errorf("%s %s/%s was written by a reconcile of the converged resource", o.gvr.Resource, ns, o.name)
		}
	}

	// A manifest change that updates all three objects is one reconcile,
	// the change's: the events of its writes, which the watch often
	// delivers before the writes' answers, wake nothing.
	updateVR(t, ns, "quiet", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Manifest = docs(configMap("a", map[string]string{"k": "2"}),
			strings.Replace(serviceDoc, "port: 80", "port: 8080", 1),
			strings.Replace(deploymentDoc, "replicas: 2", "replicas: 3", 1))
	})
	waitReady(t, ns, "quiet")
	for _, o := range objects {
		waitObject(t, o.gvr, ns, o.name, "was updated", func(cur *unstructured.Unstructured) bool { return cur.GetResourceVersion() != o.rv })
	}
	b.pass(t)
	changed := reconciled(t, ns, "quiet")
	if n := changed[controller.TriggerEvent] - after[controller.TriggerEvent]; n != 1 {
		t.Errorf("%d event-driven reconciles for a manifest change that updates three objects, want 1, the change's (by trigger %v, then %v): own updates are feeding back", n, after, changed)
	}
}

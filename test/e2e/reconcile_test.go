// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller"
)

func configMap(name string, data map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n", name)
	for k, v := range data {
		fmt.Fprintf(&b, "  %s: %q\n", k, v)
	}
	return b.String()
}

const serviceDoc = `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
    - name: http
      port: 80
`

const deploymentDoc = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: registry.k8s.io/pause:3.10
`

func docs(parts ...string) string { return strings.Join(parts, "---\n") }

func TestCreateAppliesObjectsAndReportsReady(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "app", docs(configMap("settings", map[string]string{"a": "1"}), serviceDoc, deploymentDoc))
	vr := waitReady(t, ns, "app")

	if vr.Status.DeployState != v1alpha1.DeployStateSucceeded || vr.Status.ManagedCount != 3 || len(vr.Status.ManagedResources) != 3 {
		t.Fatalf("status = %+v", vr.Status)
	}
	if vr.Status.LastSyncTime == nil {
		t.Error("lastSyncTime not set after the first apply")
	}
	if len(vr.Finalizers) != 1 || vr.Finalizers[0] != v1alpha1.Finalizer {
		t.Errorf("finalizers = %v", vr.Finalizers)
	}
	cm := waitObject(t, configMaps, ns, "settings", "exists", exists)
	if cm.GetLabels()[v1alpha1.ManagedByLabel] != "vidra" || cm.GetLabels()[v1alpha1.OwnerUIDLabel] != string(vr.UID) ||
		cm.GetAnnotations()[v1alpha1.OwnedByAnnotation] != ns+"/app" {
		t.Errorf("marks missing: labels %v annotations %v", cm.GetLabels(), cm.GetAnnotations())
	}
	for _, e := range cm.GetManagedFields() {
		if e.Manager == "vidra" && e.Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("vidra wrote with %s, want server-side apply", e.Operation)
		}
	}
	waitObject(t, services, ns, "web", "exists", exists)
	waitObject(t, deployments, ns, "web", "exists", exists)
	// The first apply has no Event of its own (Ready says it); a manifest
	// change has. Events of one resource arrive in order, so the second
	// is the barrier after which the first would have been listed.
	if msg := readyMessage(vr); !strings.Contains(msg, "3 objects applied") {
		t.Errorf("Ready message = %q", msg)
	}
	updateVR(t, ns, "app", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Manifest = docs(configMap("settings", map[string]string{"a": "2"}), serviceDoc, deploymentDoc)
	})
	waitEvent(t, ns, "app", "Applied", "Applied 1 object (0 created, 1 configured); 3 managed")
	events, err := kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=app,reason=Applied"})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 1 {
		t.Errorf("Applied Events = %d, want only the manifest change's: %v", len(events.Items), events.Items)
	}
}

func TestManifestUpdateUpdatesObjects(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "upd", configMap("settings", map[string]string{"a": "1"}))
	waitReady(t, ns, "upd")
	updateVR(t, ns, "upd", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Manifest = configMap("settings", map[string]string{"a": "2", "b": "3"})
	})
	waitObject(t, configMaps, ns, "settings", "got the new data", func(o *unstructured.Unstructured) bool {
		d, _, _ := unstructured.NestedStringMap(o.Object, "data")
		return d["a"] == "2" && d["b"] == "3"
	})
	waitReady(t, ns, "upd")
}

// A field the manifest stops setting leaves the object: the live object
// still contains the new, smaller one, so being "in sync" by containment is
// not enough once the manifest changed.
func TestFieldDroppedFromManifestIsRemoved(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "drop", configMap("settings", map[string]string{"a": "1", "b": "2"}))
	waitReady(t, ns, "drop")
	updateVR(t, ns, "drop", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Manifest = configMap("settings", map[string]string{"a": "1"})
	})
	waitObject(t, configMaps, ns, "settings", "lost the key the manifest dropped", func(o *unstructured.Unstructured) bool {
		d, _, _ := unstructured.NestedStringMap(o.Object, "data")
		_, b := d["b"]
		return d["a"] == "1" && !b
	})
	waitReady(t, ns, "drop")
}

// The create-only guard of a first apply must leave the object exactly as a
// plain apply would: every field owned by Vidra's Apply entry alone, and
// neither guard field tracked.
func TestCreatedObjectIsOwnedByVidrasApply(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "own", configMap("settings", map[string]string{"a": "1", "b": "2"}))
	waitReady(t, ns, "own")
	cm := waitObject(t, configMaps, ns, "settings", "exists", exists)
	mf := cm.GetManagedFields()
	if len(mf) != 1 || mf[0].Manager != v1alpha1.FieldManager || mf[0].Operation != metav1.ManagedFieldsOperationApply || mf[0].FieldsV1 == nil {
		t.Fatalf("managedFields = %+v, want one Apply entry of %s", mf, v1alpha1.FieldManager)
	}
	owned := string(mf[0].FieldsV1.Raw)
	for _, field := range []string{`"f:a"`, `"f:b"`, `"f:` + v1alpha1.OwnerUIDLabel + `"`} {
		if !strings.Contains(owned, field) {
			t.Errorf("the apply does not own %s: %s", field, owned)
		}
	}
	for _, guard := range []string{"f:resourceVersion", "f:uid"} {
		if strings.Contains(owned, guard) {
			t.Errorf("the apply owns %s: %s", guard, owned)
		}
	}
}

func TestRemovedObjectIsPruned(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "prune", docs(configMap("keep", nil), configMap("drop", nil)))
	waitReady(t, ns, "prune")
	updateVR(t, ns, "prune", func(vr *v1alpha1.VidraResource) { vr.Spec.Manifest = configMap("keep", nil) })
	waitGone(t, configMaps, ns, "drop", "was pruned")
	vr := waitReady(t, ns, "prune")
	if vr.Status.ManagedCount != 1 {
		t.Fatalf("inventory = %+v", vr.Status.ManagedResources)
	}
	waitObject(t, configMaps, ns, "keep", "exists", exists)
}

func TestPruneDisabledReleasesObjects(t *testing.T) {
	ns := namespace(t)
	no := false
	createVR(t, ns, "noprune", docs(configMap("keep", nil), configMap("left", nil)), func(vr *v1alpha1.VidraResource) { vr.Spec.Prune = &no })
	waitReady(t, ns, "noprune")
	updateVR(t, ns, "noprune", func(vr *v1alpha1.VidraResource) { vr.Spec.Manifest = configMap("keep", nil) })
	waitObject(t, configMaps, ns, "left", "lost Vidra's marks", func(o *unstructured.Unstructured) bool {
		return o.GetLabels()[v1alpha1.OwnerUIDLabel] == ""
	})
	// Kept, so said as a release, never as a prune.
	waitEvent(t, ns, "noprune", "Released", "Released 1 object that left the manifest")
	assertNoEvent(t, ns, "noprune", "Pruned")
}

// An Event is served in two groups, core and events.k8s.io, as one stored
// object. A manifest that moves its Event from one to the other still
// declares it: the inventory's entry of the old group is the same object,
// and pruning it would delete what was just applied.
func TestAnEventMovedBetweenItsTwoGroupsIsNotPruned(t *testing.T) {
	ns := namespace(t)
	// The events.k8s.io API keeps an Event's fields immutable: both set
	// them alike, and the move adds a label.
	core := fmt.Sprintf(`apiVersion: v1
kind: Event
metadata: {name: moved}
involvedObject: {apiVersion: v1, kind: ConfigMap, namespace: %[1]s, name: subject}
eventTime: "2026-01-01T00:00:00.000000Z"
reportingComponent: example.com/release
reportingInstance: release-1
action: Release
reason: Released
type: Normal
message: released
`, ns)
	events := fmt.Sprintf(`apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: moved, labels: {moved: "yes"}}
regarding: {apiVersion: v1, kind: ConfigMap, namespace: %[1]s, name: subject}
eventTime: "2026-01-01T00:00:00.000000Z"
reportingController: example.com/release
reportingInstance: release-1
action: Release
reason: Released
type: Normal
note: released
`, ns)
	createVR(t, ns, "events", core)
	waitReady(t, ns, "events")
	before, err := kube.CoreV1().Events(ns).Get(t.Context(), "moved", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	updateVR(t, ns, "events", func(vr *v1alpha1.VidraResource) { vr.Spec.Manifest = events })
	vr := waitReady(t, ns, "events")
	after, err := kube.CoreV1().Events(ns).Get(t.Context(), "moved", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Event the manifest still declares is gone: %v", err)
	}
	if after.UID != before.UID || after.Labels["moved"] != "yes" {
		t.Errorf("the Event is %s with labels %v, want %s with label moved", after.UID, after.Labels, before.UID)
	}
	if len(vr.Status.ManagedResources) != 1 || vr.Status.ManagedResources[0].APIVersion != "events.k8s.io/v1" {
		t.Errorf("inventory %v, want the Event once, as events.k8s.io/v1", vr.Status.ManagedResources)
	}
	// Events are recorded after the status, in the order a resource's
	// reconciles made them: the Event of a later reconcile is the barrier
	// after which a Pruned Event of the move would have been recorded.
	updateVR(t, ns, "events", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Manifest = events + "---\n" + configMap("barrier", map[string]string{"a": "1"})
	})
	waitEvent(t, ns, "events", "Applied", "(1 created, 0 configured); 2 managed")
	assertNoEvent(t, ns, "events", "Pruned")
}

// assertNoEvent fails if the resource has an Event of reason. Call it after
// waiting for an Event recorded with or after the one that must not be.
func assertNoEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	list, err := kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason == reason {
			t.Errorf("unexpected Event %s: %s", e.Reason, e.Message)
		}
	}
}

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

func TestRequestedAtTriggersReconcileAndIsEchoed(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "req", configMap("a", nil))
	waitReady(t, ns, "req")
	updateVR(t, ns, "req", func(vr *v1alpha1.VidraResource) {
		vr.Annotations = map[string]string{v1alpha1.RequestedAtAnnotation: "2026-11-21T10:00:00Z"}
	})
	waitVR(t, ns, "req", "echoed the request", func(vr *v1alpha1.VidraResource) bool {
		return vr.Status.LastHandledReconcileAt == "2026-11-21T10:00:00Z"
	})
	// The hook runs after the status write the poll above saw.
	waitCount(t, ns, "req", "one requested reconcile", func(by map[controller.Trigger]int) bool { return by["requested"] == 1 })

	// A value as long as annotations allow is echoed cut short, not whole:
	// status must stay writable whatever the annotation holds.
	long := strings.Repeat("x", 200<<10)
	updateVR(t, ns, "req", func(vr *v1alpha1.VidraResource) {
		vr.Annotations = map[string]string{v1alpha1.RequestedAtAnnotation: long}
	})
	waitVR(t, ns, "req", "echoed the long request cut short", func(vr *v1alpha1.VidraResource) bool {
		v := vr.Status.LastHandledReconcileAt
		return len(v) == 256 && strings.HasPrefix(long, strings.TrimSuffix(v, "..."))
	})
}

func TestSuspendStopsAndResumeRestores(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "susp", configMap("a", map[string]string{"k": "v"}))
	waitReady(t, ns, "susp")
	b := newBarrier(t, ns, configMaps)
	updateVR(t, ns, "susp", func(vr *v1alpha1.VidraResource) { vr.Spec.Suspend = true })
	waitVR(t, ns, "susp", "was suspended", func(vr *v1alpha1.VidraResource) bool {
		return vr.Status.DeployState == v1alpha1.DeployStateStale && vr.Status.ObservedGeneration == vr.Generation
	})
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Neither the deletion's event, which the barrier shows was handled,
	// nor a reconcile of the suspended resource brings the object back.
	b.pass(t)
	reconciled(t, ns, "susp")
	if _, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the deleted object came back while suspended (err %v)", err)
	}
	updateVR(t, ns, "susp", func(vr *v1alpha1.VidraResource) { vr.Spec.Suspend = false })
	waitObject(t, configMaps, ns, "a", "was restored after resume", exists)
	waitReady(t, ns, "susp")
}

func TestDeletionPolicyDeleteRemovesObjects(t *testing.T) {
	ns := namespace(t)
	target := ns + "-owned"
	createVR(t, ns, "del", docs(fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", target), configMap("a", nil)))
	waitReady(t, ns, "del")
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "del", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, configMaps, ns, "a", "was deleted")
	waitGone(t, namespaces, "", target, "was deleted")
	waitVRGone(t, ns, "del")
}

// TestDeletionEndsWhenTheObjectItWaitsForGoes: an object another
// controller's finalizer holds keeps the resource's deletion waiting, the
// object named in Ready's message. Once the finalizer lets it go, its
// delete event ends the wait: not the work queue's next retry, which by
// then is seconds away (and minutes, for a finalizer that takes longer).
func TestDeletionEndsWhenTheObjectItWaitsForGoes(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "app", configMap("held", map[string]string{"a": "1"}))
	waitReady(t, ns, "app")
	release := func() error {
		_, err := kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		return err
	}
	t.Cleanup(func() { _ = release() })
	if _, err := kube.CoreV1().ConfigMaps(ns).Patch(t.Context(), "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":["example.com/hold"]}}`), metav1.PatchOptions{FieldManager: "other-controller"}); err != nil {
		t.Fatal(err)
	}
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitVR(t, ns, "app", "waited for the held ConfigMap, naming it", func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonDeleting && strings.HasSuffix(c.Message, ": ConfigMap "+ns+"/held")
	})
	// Four retries back off 0.2, 0.4, 0.8 and 1.6 s; the fifth is 3.2 s
	// after the fourth: an event ends the wait long before it.
	waitCount(t, ns, "app", "four retries", func(by map[controller.Trigger]int) bool { return by[controller.TriggerRetry] >= 4 })
	before, _ := reconciles.of(ns, "app")
	if err := release(); err != nil {
		t.Fatal(err)
	}
	waitVRGone(t, ns, "app")
	if after, _ := reconciles.of(ns, "app"); after[controller.TriggerRetry] != before[controller.TriggerRetry] {
		t.Errorf("the deletion ended on a retry (%d retries, then %d), not on the held object's delete event", before[controller.TriggerRetry], after[controller.TriggerRetry])
	}
}

func TestDeletionPolicyOrphanLeavesObjectsUnmarked(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "orphan", configMap("a", nil), func(vr *v1alpha1.VidraResource) { vr.Spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan })
	waitReady(t, ns, "orphan")
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "orphan", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, configMaps, ns, "a", "was released", func(o *unstructured.Unstructured) bool {
		l, a := o.GetLabels(), o.GetAnnotations()
		return l[v1alpha1.ManagedByLabel] == "" && l[v1alpha1.OwnerUIDLabel] == "" && a[v1alpha1.OwnedByAnnotation] == ""
	})
	waitVRGone(t, ns, "orphan")
}

func waitVRGone(t *testing.T, ns, name string) {
	t.Helper()
	waitGone(t, vrResource, ns, name, "went away")
}

func TestConflictNamesTheOtherOwnerWithoutFlapping(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "first", configMap("shared", map[string]string{"from": "first"}))
	waitReady(t, ns, "first")
	createVR(t, ns, "second", configMap("shared", map[string]string{"from": "second"}))
	vr := waitVR(t, ns, "second", "reported a conflict", hasCondition(v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonOwnedByOther))
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionConflict); !strings.Contains(c.Message, ns+"/first") {
		t.Fatalf("conflict does not name the owner: %q", c.Message)
	}
	cm := waitObject(t, configMaps, ns, "shared", "exists", exists)
	// Each reconciling again, neither takes the object from the other.
	reconciled(t, ns, "second")
	reconciled(t, ns, "first")
	cur, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "shared", metav1.GetOptions{})
	if err != nil || cur.ResourceVersion != cm.GetResourceVersion() || cur.Data["from"] != "first" {
		t.Fatalf("the object did not stay with its owner: %v (err %v)", cur, err)
	}
	waitReady(t, ns, "first")
}

func TestPreexistingUnmanagedObjectIsNotTakenOver(t *testing.T) {
	ns := namespace(t)
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "mine"}, Data: map[string]string{"owner": "human"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createVR(t, ns, "grab", configMap("mine", map[string]string{"owner": "vidra"}))
	waitVR(t, ns, "grab", "reported the unmanaged object", hasCondition(v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonUnmanagedExists))
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "mine", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["owner"] != "human" || cm.Labels[v1alpha1.ManagedByLabel] != "" {
		t.Fatalf("object was taken over: %+v", cm)
	}
}

// The message of UnmanagedObjectExists says to delete the object and Vidra
// creates it: that must come true without anyone touching the resource.
// Until then the resource needs a person, so it is Failed, not Running.
func TestUnmanagedObjectDeletedIsCreatedWithoutAnyoneTouchingTheResource(t *testing.T) {
	ns := namespace(t)
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "squatter"}, Data: map[string]string{"owner": "human"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createVR(t, ns, "wants", configMap("squatter", map[string]string{"owner": "vidra"}))
	vr := waitVR(t, ns, "wants", "reported the unmanaged object", hasCondition(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonUnmanagedExists))
	if vr.Status.DeployState != v1alpha1.DeployStateFailed {
		t.Errorf("deployState = %s, want Failed: the resource needs a person", vr.Status.DeployState)
	}
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "squatter", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, configMaps, ns, "squatter", "was created by Vidra", func(o *unstructured.Unstructured) bool {
		return o.GetLabels()[v1alpha1.ManagedByLabel] == v1alpha1.ManagedByValue
	})
	waitReady(t, ns, "wants")
}

func TestAnotherWriterFightingOverAFieldIsReportedAsConflict(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "fight", configMap("contested", map[string]string{"mode": "declared"}))
	waitReady(t, ns, "fight")
	for i := range 3 {
		patch := fmt.Appendf(nil, `{"data":{"mode":"theirs-%d"}}`, i)
		if _, err := kube.CoreV1().ConfigMaps(ns).Patch(t.Context(), "contested", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "rival-controller"}); err != nil {
			t.Fatal(err)
		}
		waitObject(t, configMaps, ns, "contested", "was restored", func(o *unstructured.Unstructured) bool {
			v, _, _ := unstructured.NestedString(o.Object, "data", "mode")
			return v == "declared"
		})
	}
	vr := waitVR(t, ns, "fight", "reported the contention", hasCondition(v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonFieldConflict))
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionConflict); !strings.Contains(c.Message, "rival-controller") || !strings.Contains(c.Message, "(/data/mode)") {
		t.Errorf("conflict does not name the other writer and the field: %q", c.Message)
	}
	if !isReady(vr) {
		t.Errorf("the resource is in sync and should stay Ready: %+v", vr.Status.Conditions)
	}
	// kubectl get -o wide shows the Ready message alone: the conflict must
	// be in it.
	if msg := readyMessage(vr); !strings.Contains(msg, "Conflict") || !strings.Contains(msg, "rival-controller") {
		t.Errorf("Ready message %q hides the conflict", msg)
	}
	waitEvent(t, ns, "fight", "Conflict", "rival-controller")
}

func TestPreexistingIdenticalObjectIsNeitherWrittenNorAdopted(t *testing.T) {
	ns := namespace(t)
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "same"}, Data: map[string]string{"k": "v"},
	}, metav1.CreateOptions{FieldManager: "kubectl-create"}); err != nil {
		t.Fatal(err)
	}
	// The same values: a plain non-forced apply would meet no field
	// conflict, and mark the object.
	createVR(t, ns, "same", configMap("same", map[string]string{"k": "v"}))
	waitVR(t, ns, "same", "reported the unmanaged object", hasCondition(v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonUnmanagedExists))
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "same", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels[v1alpha1.ManagedByLabel] != "" || cm.Labels[v1alpha1.OwnerUIDLabel] != "" || cm.Annotations[v1alpha1.OwnedByAnnotation] != "" {
		t.Fatalf("object kept Vidra's marks: labels %v annotations %v", cm.Labels, cm.Annotations)
	}
	if cm.Data["k"] != "v" {
		t.Fatalf("object content changed: %v", cm.Data)
	}
	// Found once, the object is read from then on, never written.
	reconciled(t, ns, "same")
	cur, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "same", metav1.GetOptions{})
	if err != nil || cur.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("the object was written: %v (err %v)", cur, err)
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

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

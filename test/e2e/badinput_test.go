// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"context"
	"fmt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vidra-operator/vidra/internal/config"
	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller"
)

// readyMessage returns the Ready condition's message.
func readyMessage(vr *v1alpha1.VidraResource) string {
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// waitEvent waits for an Event on the resource with reason, whose message
// contains fragment.
func waitEvent(t *testing.T, ns, name, reason, fragment string) {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, nil
		}
		seen = seen[:0]
		for _, e := range list.Items {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == reason && strings.Contains(e.Message, fragment) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Event %s containing %q on %s/%s; seen: %q", reason, fragment, ns, name, seen)
	}
}

// failsWith creates a resource and waits for Ready=False with reason, and
// the message fragments in the condition and in an Event.
func failsWith(t *testing.T, ns, name, manifest, reason string, fragments ...string) *v1alpha1.VidraResource {
	t.Helper()
	createVR(t, ns, name, manifest)
	vr := waitVR(t, ns, name, "failed with "+reason, hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, reason))
	for _, f := range fragments {
		if !strings.Contains(readyMessage(vr), f) {
			t.Errorf("Ready message %q lacks %q", readyMessage(vr), f)
		}
	}
	waitEvent(t, ns, name, eventReasonFor(reason), fragments[0])
	return vr
}

func eventReasonFor(conditionReason string) string {
	switch conditionReason {
	case v1alpha1.ReasonOwnedByOther, v1alpha1.ReasonUnmanagedExists:
		return "Conflict"
	case "InvalidManifest", "DuplicateObject", "NamespaceNotAllowed", "UnknownKind":
		return conditionReason
	}
	return "ApplyFailed"
}

func TestInvalidYAMLIsReportedWithDocumentAndLineAndLosesNothing(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "yaml", configMap("kept", nil))
	waitReady(t, ns, "yaml")
	updateVR(t, ns, "yaml", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Manifest = configMap("kept", nil) + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n"
	})
	vr := waitVR(t, ns, "yaml", "reported the YAML error", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, "InvalidManifest"))
	msg := readyMessage(vr)
	if !strings.Contains(msg, "document 2") || !strings.Contains(msg, "line") {
		t.Errorf("message %q does not locate the error", msg)
	}
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("a broken manifest should stall: %+v", vr.Status.Conditions)
	}
	if vr.Status.ManagedCount != 1 {
		t.Errorf("inventory changed: %+v", vr.Status.ManagedResources)
	}
	waitEvent(t, ns, "yaml", "InvalidManifest", "document 2")
	waitObject(t, configMaps, ns, "kept", "still exists", exists)
}

func TestMissingKindIsReported(t *testing.T) {
	ns := namespace(t)
	failsWith(t, ns, "nokind", "apiVersion: v1\nmetadata:\n  name: x\n", "InvalidManifest", "kind")
}

func TestDuplicateObjectIsReported(t *testing.T) {
	ns := namespace(t)
	failsWith(t, ns, "dup", docs(configMap("twice", nil), configMap("twice", nil)), "DuplicateObject", "twice")
	if _, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "twice", metav1.GetOptions{}); err == nil {
		t.Error("a manifest with a duplicate was applied")
	}
}

func TestClusterScopedObjectWithNamespaceIsReported(t *testing.T) {
	ns := namespace(t)
	failsWith(t, ns, "scoped", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: scoped-x\n  namespace: default\n", "NamespaceNotAllowed", "scoped-x")
}

func TestMissingNamespaceIsReported(t *testing.T) {
	ns := namespace(t)
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lost\n  namespace: does-not-exist\n"
	failsWith(t, ns, "nons", doc, v1alpha1.ReasonNamespaceNotFound, "does-not-exist")
}

// TestOversizedManifestIsRefusedSayingHowToSplit: a manifest over the API
// server's limit for one object (here an object of 1.1 MB) never reaches
// the operator: the CRD bounds spec.manifest well below it and the API
// server refuses the resource, saying how to split it. (Resources stored
// before the bound are reported as ManifestTooLarge by the operator,
// which checks the same number: internal/apply's tests.)
func TestOversizedManifestIsRefusedSayingHowToSplit(t *testing.T) {
	ns := namespace(t)
	big := strings.Repeat("x", 1100*1024)
	doc := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  blob: %s\n", big)
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns}, Spec: v1alpha1.VidraResourceSpec{Manifest: doc}}
	_, err := vidra.InfrahubV1alpha1().VidraResources(ns).Create(t.Context(), vr, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), v1alpha1.ManifestTooLargeMessage) {
		t.Errorf("creating a resource of a %d-byte manifest: want the API server's refusal saying how to split, got %.300v", len(doc), err)
	}
}

func TestImmutableFieldNeedsForce(t *testing.T) {
	ns := namespace(t)
	immutable := func(v string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: frozen\nimmutable: true\ndata:\n  v: %q\n", v)
	}
	createVR(t, ns, "imm", immutable("1"))
	waitReady(t, ns, "imm")
	updateVR(t, ns, "imm", func(vr *v1alpha1.VidraResource) { vr.Spec.Manifest = immutable("2") })
	vr := waitVR(t, ns, "imm", "reported the immutable field", hasCondition(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonImmutableField))
	if !strings.Contains(readyMessage(vr), "spec.force") {
		t.Errorf("message does not tell how to proceed: %q", readyMessage(vr))
	}
	updateVR(t, ns, "imm", func(vr *v1alpha1.VidraResource) { vr.Spec.Force = true })
	waitObject(t, configMaps, ns, "frozen", "was recreated with the new data", func(o *unstructured.Unstructured) bool {
		v, _, _ := unstructured.NestedString(o.Object, "data", "v")
		return v == "2"
	})
	waitReady(t, ns, "imm")
	waitEvent(t, ns, "imm", "Applied", "Applied 1 object (0 created, 0 configured, 1 recreated for spec.force)")
}

// TestFieldsTheSchemaLacksStallTheResource: the API server refuses such an
// apply as an internal error; Vidra says which field to fix, stops retrying
// (only an edit fixes a built-in kind), and still applies the rest.
func TestFieldsTheSchemaLacksStallTheResource(t *testing.T) {
	ns := namespace(t)
	typo := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: typo\ndat:\n  b: c\n"
	createVR(t, ns, "schema", docs(configMap("fine", map[string]string{"k": "v"}), typo))
	vr := waitVR(t, ns, "schema", "stalled on the manifest", hasCondition(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidManifest))
	want := "ConfigMap " + ns + "/typo (document 2): v1 ConfigMap has no field .dat: check its spelling and indentation (the object starts at line 8)"
	if msg := readyMessage(vr); msg != want {
		t.Errorf("Ready message\n  %q\nwant\n  %q", msg, want)
	}
	waitEvent(t, ns, "schema", "ApplyFailed", want)
	waitObject(t, configMaps, ns, "fine", "was applied beside the refused object", exists)
	// Not retried: after the requested reconcile, the only ones are the
	// first and that one.
	by := reconciled(t, ns, "schema")
	if by[controller.TriggerRetry] != 0 {
		t.Errorf("a refusal only an edit can fix was retried: %v", by)
	}
}

// crdManifest is a CRD of kind kind in group group, namespaced.
func crdManifest(group, kind string) string {
	plural := strings.ToLower(kind) + "s"
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  scope: Namespaced
  names:
    kind: %[2]s
    plural: %[3]s
    singular: %[4]s
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`, group, kind, plural, strings.ToLower(kind))
}

func TestCRDAndItsCustomResourceInOneManifest(t *testing.T) {
	ns := namespace(t)
	cr := "apiVersion: one.e2e.vidra.test/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n"
	// The custom resource comes first: Vidra orders CRDs before it.
	createVR(t, ns, "crd", docs(cr, crdManifest("one.e2e.vidra.test", "Widget")))
	waitReady(t, ns, "crd")
	gvr := schema.GroupVersionResource{Group: "one.e2e.vidra.test", Version: "v1", Resource: "widgets"}
	waitObject(t, gvr, ns, "w1", "exists", exists)
	// Drift of the custom resource is corrected too.
	if err := dyn.Resource(gvr).Namespace(ns).Delete(t.Context(), "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, gvr, ns, "w1", "was restored", exists)
}

// Deleting a CRD deletes every custom resource of its kind, in every
// namespace, whoever declared them. spec.force recreates an object whose
// immutable field changed: for a CRD (its scope changed) it only reports
// the field, unless spec.pruneNamespacesAndCRDs allows deleting it.
func TestForceDoesNotRecreateACRD(t *testing.T) {
	ns := namespace(t)
	const group = "three.e2e.vidra.test"
	cr := "apiVersion: " + group + "/v1\nkind: Doohickey\nmetadata:\n  name: d1\n"
	crd := crdManifest(group, "Doohickey")
	createVR(t, ns, "crdforce", docs(crd, cr))
	waitReady(t, ns, "crdforce")
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	before, err := dyn.Resource(crds).Get(t.Context(), "doohickeys."+group, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(crds).Delete(context.Background(), "doohickeys."+group, metav1.DeleteOptions{})
	})
	updateVR(t, ns, "crdforce", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Manifest = docs(strings.Replace(crd, "scope: Namespaced", "scope: Cluster", 1), cr)
		vr.Spec.Force = true
	})
	vr := waitVR(t, ns, "crdforce", "reported the immutable scope", hasCondition(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonImmutableField))
	if msg := readyMessage(vr); !strings.Contains(msg, "spec.pruneNamespacesAndCRDs") {
		t.Errorf("message does not say why force did not recreate the CRD: %q", msg)
	}
	after, err := dyn.Resource(crds).Get(t.Context(), "doohickeys."+group, metav1.GetOptions{})
	if err != nil || after.GetUID() != before.GetUID() || after.GetDeletionTimestamp() != nil {
		t.Fatalf("the CRD was deleted for spec.force (err %v)", err)
	}
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "doohickeys"}
	if _, err := dyn.Resource(gvr).Namespace(ns).Get(t.Context(), "d1", metav1.GetOptions{}); err != nil {
		t.Errorf("the custom resource of the CRD is gone: %v", err)
	}
}

func TestUnknownKindIsRetriedUntilItsCRDAppears(t *testing.T) {
	ns := namespace(t)
	cr := "apiVersion: two.e2e.vidra.test/v1\nkind: Gadget\nmetadata:\n  name: g1\n"
	createVR(t, ns, "unknown", docs(configMap("alongside", nil), cr))
	vr := waitVR(t, ns, "unknown", "reported the unknown kind", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, "UnknownKind"))
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("an unknown kind is retried, so Reconciling should be True: %+v", vr.Status.Conditions)
	}
	// Retried, but most likely a typo or a CRD someone must install: the
	// one-word state says it needs a person.
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || vr.Status.DeployState != v1alpha1.DeployStateFailed {
		t.Errorf("an unknown kind needs a person: want Stalled=True and deployState Failed, got %s, %+v", vr.Status.DeployState, vr.Status.Conditions)
	}
	if !strings.Contains(readyMessage(vr), "Gadget") {
		t.Errorf("message does not name the kind: %q", readyMessage(vr))
	}
	file := filepath.Join(t.TempDir(), "crd.yaml")
	if err := os.WriteFile(file, []byte(crdManifest("two.e2e.vidra.test", "Gadget")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := testenv.InstallCRDs(t.Context(), env.Config, file); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(testenv.CRDResource).Delete(context.Background(), "gadgets.two.e2e.vidra.test", metav1.DeleteOptions{})
	})
	waitReady(t, ns, "unknown")
	waitObject(t, schema.GroupVersionResource{Group: "two.e2e.vidra.test", Version: "v1", Resource: "gadgets"}, ns, "g1", "exists", exists)
}

// setConfig writes the operator's ConfigMap and restores defaults afterwards.
func setConfig(t *testing.T, data map[string]string) {
	t.Helper()
	cms := kube.CoreV1().ConfigMaps(operatorNamespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "vidra-config"}, Data: data}
	if _, err := cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		if _, err := cms.Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = cms.Delete(context.Background(), "vidra-config", metav1.DeleteOptions{})
		// Every setting back to its default, not one of them: the next
		// test must not run with this one's configuration.
		err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return cmp.Equal(vidraOp.Config.Current(), config.Default()), nil
		})
		if err != nil {
			t.Errorf("cleanup: the operator's configuration never went back to the defaults (-defaults +current):\n%s", cmp.Diff(config.Default(), vidraOp.Config.Current()))
		}
	})
}

func TestMalformedConfigValueKeepsPreviousSettingAndIsReported(t *testing.T) {
	setConfig(t, map[string]string{"requeueResourcesAfter": "7m"})
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return vidraOp.Config.Current().RequeueAfter == 7*time.Minute, nil
	})
	if err != nil {
		t.Fatalf("config not applied: %+v", vidraOp.Config.Current())
	}
	setConfig(t, map[string]string{"requeueResourcesAfter": "soon", "eventBasedReconcile": "true"})
	waitEvent(t, operatorNamespace, "vidra-config", "InvalidConfig", "requeueResourcesAfter")
	if got := vidraOp.Config.Current().RequeueAfter; got != 7*time.Minute {
		t.Fatalf("interval after a bad value = %v, want the previous 7m", got)
	}
}

func TestPeriodicModeCorrectsOnTheIntervalOnly(t *testing.T) {
	ns := namespace(t)
	b := newBarrier(t, ns, configMaps)
	off := false
	createVR(t, ns, "periodic", configMap("p", nil), func(vr *v1alpha1.VidraResource) {
		vr.Spec.Destination.ReconcileOnEvents = &off
		vr.Spec.Interval = &metav1.Duration{Duration: 3 * time.Second}
	})
	waitReady(t, ns, "periodic")
	before := reconciled(t, ns, "periodic")
	deleted := time.Now()
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Once the barrier has passed, the deletion's event has been handled:
	// it must have woken nothing, and only the interval brings the object
	// back.
	b.pass(t)
	waitObject(t, configMaps, ns, "p", "was restored on the interval", exists)
	t.Logf("restored %v after the deletion", time.Since(deleted).Round(10*time.Millisecond))
	// The requested reconcile is counted after the one that restored it.
	after := reconciled(t, ns, "periodic")
	if after[controller.TriggerInterval] == before[controller.TriggerInterval] || after[controller.TriggerEvent] != before[controller.TriggerEvent] {
		t.Errorf("reconciles by trigger = %v, %v before the deletion; want interval ones and no event-driven repair", after, before)
	}
}

func TestConfigMapChangesTheIntervalWithoutRestart(t *testing.T) {
	ns := namespace(t)
	off := false
	createVR(t, ns, "cfg", configMap("c", nil), func(vr *v1alpha1.VidraResource) { vr.Spec.Destination.ReconcileOnEvents = &off })
	waitReady(t, ns, "cfg")
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// With the default 10m interval nothing would restore it in this test.
	setConfig(t, map[string]string{"requeueResourcesAfter": "1s", "requeueJitter": "0%"})
	waitObject(t, configMaps, ns, "c", "was restored on the new interval", exists)
}

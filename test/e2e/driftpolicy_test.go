// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// annotated adds annotations to the metadata of a one-object document.
func annotated(doc string, annotations map[string]string) string {
	var b strings.Builder
	b.WriteString("  annotations:\n")
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		fmt.Fprintf(&b, "    %s: %q\n", k, annotations[k])
	}
	return strings.Replace(doc, "metadata:\n", "metadata:\n"+b.String(), 1)
}

func replicasOf(t *testing.T, ns string) int32 {
	t.Helper()
	d, err := kube.AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

// scale writes the replicas of Deployment web through its scale
// subresource, as an autoscaler does.
func scale(t *testing.T, ns string, replicas int32, manager string) {
	t.Helper()
	s := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	if _, err := kube.AppsV1().Deployments(ns).UpdateScale(t.Context(), "web", s, metav1.UpdateOptions{FieldManager: manager}); err != nil {
		t.Fatal(err)
	}
}

// An autoscaler owns /spec/replicas under an ignore rule: Vidra makes no
// request over a hundred of its writes, and a manifest change keeps its
// value.
func TestIgnoredReplicasAreLeftToTheAutoscaler(t *testing.T) {
	ns := namespace(t)
	b := newBarrier(t, ns, deployments)
	createVR(t, ns, "scaled", deploymentDoc, func(vr *v1alpha1.VidraResource) {
		vr.Spec.Ignore = []v1alpha1.IgnoreRule{{Target: v1alpha1.IgnoreTarget{Kind: "Deployment", Name: "web"}, Paths: []string{"/spec/replicas"}}}
	})
	waitReady(t, ns, "scaled")
	if r := replicasOf(t, ns); r != 2 {
		t.Fatalf("created with %d replicas, want the manifest's 2", r)
	}

	// Every write to the Deployment shows in its watch: the autoscaler's,
	// and any of Vidra's.
	d, err := kube.AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := kube.AppsV1().Deployments(ns).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=web", ResourceVersion: d.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	const writes = 100
	for i := range writes {
		manager := "hpa-like"
		if i == writes-1 {
			// A person's kubectl scale is a hand edit, but of a field the
			// rule hands to others.
			manager = "kubectl-scale"
		}
		scale(t, ns, int32(3+i%5), manager)
	}
	b.pass(t)
	reconciled(t, ns, "scaled")
	// The marker is the last write the watch must see: every write before
	// it, Vidra's included, came first.
	marker := []byte(`{"metadata":{"annotations":{"e2e.example.com/marker":"1"}}}`)
	if _, err := kube.AppsV1().Deployments(ns).Patch(t.Context(), "web", types.MergePatchType, marker, metav1.PatchOptions{FieldManager: "e2e-marker"}); err != nil {
		t.Fatal(err)
	}
	modified := 0
	deadline := time.After(60 * time.Second)
watching:
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of the Deployment ended before the marker write came through; %d writes seen", modified)
			}
			if ev.Type != watch.Modified {
				continue
			}
			modified++
			u := ev.Object.(interface{ GetAnnotations() map[string]string })
			if u.GetAnnotations()["e2e.example.com/marker"] == "1" {
				break watching
			}
		case <-deadline:
			t.Fatalf("the marker write never came through the watch; %d writes seen", modified)
		}
	}
	// Each of the autoscaler's writes changes the value (3, 4, … 7, 3, …
	// after the manifest's 2), so each is one event; the marker is one.
	if vidraWrites := modified - 1 - writes; vidraWrites != 0 {
		t.Errorf("Vidra wrote the Deployment %d times over %d autoscaler writes; want 0", vidraWrites, writes)
	}
	last := int32(3 + (writes-1)%5)
	if r := replicasOf(t, ns); r != last {
		t.Fatalf("replicas = %d, want the autoscaler's %d", r, last)
	}

	// A manifest change is applied and keeps the autoscaler's value.
	updateVR(t, ns, "scaled", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Manifest = strings.Replace(deploymentDoc, "pause:3.10", "pause:3.9", 1)
	})
	waitObject(t, deployments, ns, "web", "got the new image", func(o *unstructured.Unstructured) bool {
		c, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		return len(c) == 1 && c[0].(map[string]any)["image"] == "registry.k8s.io/pause:3.9"
	})
	waitReady(t, ns, "scaled")
	if r := replicasOf(t, ns); r != last {
		t.Errorf("the manifest change set replicas to %d, want the autoscaler's %d kept", r, last)
	}
}

// driftFor returns the record of kind/name in records.
func driftFor(records []v1alpha1.DriftRecord, kind, name string) *v1alpha1.DriftRecord {
	for i := range records {
		if records[i].Kind == kind && records[i].Name == name {
			return &records[i]
		}
	}
	return nil
}

func TestReportModeListsDriftAndLeavesIt(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "watched", docs(configMap("settings", map[string]string{"a": "1"}), serviceDoc), func(vr *v1alpha1.VidraResource) {
		vr.Spec.DriftPolicy = v1alpha1.DriftPolicyReport
	})
	waitReady(t, ns, "watched")
	before, _ := metricSum(t, "vidra_drift_detected_total", map[string]string{"kind": "ConfigMap", "manager": "kubectl-edit"})

	patch := []byte(`{"data":{"a":"hacked","extra":"x"}}`)
	if _, err := kube.CoreV1().ConfigMaps(ns).Patch(t.Context(), "settings", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().Services(ns).Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	vr := waitVR(t, ns, "watched", "listed both drifts", func(vr *v1alpha1.VidraResource) bool {
		return driftFor(vr.Status.Drift, "ConfigMap", "settings") != nil && driftFor(vr.Status.Drift, "Service", "web") != nil
	})
	cm := driftFor(vr.Status.Drift, "ConfigMap", "settings")
	if !slices.Equal(cm.Fields, []string{"/data/a", "/data/extra"}) || cm.Manager != "kubectl-edit" || cm.Time.IsZero() {
		t.Errorf("ConfigMap drift = %+v, want /data/a and /data/extra by kubectl-edit", cm)
	}
	if svc := driftFor(vr.Status.Drift, "Service", "web"); !svc.Deleted {
		t.Errorf("Service drift = %+v, want deleted", svc)
	}
	c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionDrifted)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonDriftDetected || !strings.Contains(c.Message, "kubectl-edit") ||
		!strings.HasPrefix(c.Message, "2 objects differ from the manifest and are left as they are ") {
		t.Errorf("Drifted condition = %+v", c)
	}
	if !isReady(vr) {
		t.Errorf("a resource that applied its manifest stays Ready in Report mode: %+v", vr.Status.Conditions)
	}
	waitEvent(t, ns, "watched", "DriftDetected", "/data/a")
	if after, _ := metricSum(t, "vidra_drift_detected_total", map[string]string{"kind": "ConfigMap", "manager": "kubectl-edit"}); after != before+1 {
		t.Errorf("vidra_drift_detected_total{ConfigMap,kubectl-edit} went from %v to %v, want +1", before, after)
	}

	// Left as they are, however often Vidra looks.
	reconciled(t, ns, "watched")
	got, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["a"] != "hacked" {
		t.Errorf("Report mode reverted the edit: %v", got.Data)
	}
	if _, err := kube.CoreV1().Services(ns).Get(t.Context(), "web", metav1.GetOptions{}); err == nil {
		t.Error("Report mode restored the deleted Service")
	}
	if vr := waitVR(t, ns, "watched", "kept its history empty", func(*v1alpha1.VidraResource) bool { return true }); len(vr.Status.DriftHistory) != 0 {
		t.Errorf("Report mode recorded corrections: %+v", vr.Status.DriftHistory)
	}

	// Correct restores both in one reconcile, and records it.
	updateVR(t, ns, "watched", func(vr *v1alpha1.VidraResource) { vr.Spec.DriftPolicy = v1alpha1.DriftPolicyCorrect })
	vr = waitVR(t, ns, "watched", "corrected both", func(vr *v1alpha1.VidraResource) bool {
		return isReady(vr) && len(vr.Status.Drift) == 0 && len(vr.Status.DriftHistory) == 2
	})
	if meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionDrifted) != nil {
		t.Errorf("Drifted condition left in Correct mode: %+v", vr.Status.Conditions)
	}
	if h := driftFor(vr.Status.DriftHistory, "ConfigMap", "settings"); h == nil || h.Manager != "kubectl-edit" || !slices.Equal(h.Fields, []string{"/data/a", "/data/extra"}) {
		t.Errorf("history of the ConfigMap = %+v", h)
	}
	if h := driftFor(vr.Status.DriftHistory, "Service", "web"); h == nil || !h.Deleted {
		t.Errorf("history of the Service = %+v", h)
	}
	got, err = kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, extra := got.Data["extra"]; got.Data["a"] != "1" || extra {
		t.Errorf("data after Correct = %v", got.Data)
	}
	waitObject(t, services, ns, "web", "was restored", exists)
}

func TestDriftHistoryKeepsTheLastTenCorrections(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "history", configMap("settings", map[string]string{"a": "1"}))
	waitReady(t, ns, "history")
	for i := range 12 {
		patch := fmt.Appendf(nil, `{"data":{"a":"edit-%d"}}`, i)
		if _, err := kube.CoreV1().ConfigMaps(ns).Patch(t.Context(), "settings", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fmt.Sprintf("writer-%d", i)}); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("writer-%d", i)
		waitVR(t, ns, "history", "recorded the correction of "+want, func(vr *v1alpha1.VidraResource) bool {
			return len(vr.Status.DriftHistory) > 0 && vr.Status.DriftHistory[0].Manager == want
		})
	}
	vr := waitVR(t, ns, "history", "has its history", func(*v1alpha1.VidraResource) bool { return true })
	if n := len(vr.Status.DriftHistory); n != 10 {
		t.Fatalf("history holds %d records, want 10", n)
	}
	for i, r := range vr.Status.DriftHistory {
		if want := fmt.Sprintf("writer-%d", 11-i); r.Manager != want || !slices.Equal(r.Fields, []string{"/data/a"}) {
			t.Errorf("record %d = %+v, want /data/a by %s", i, r, want)
		}
	}
}

func TestCreateOnlySecretIsLeftAloneAfterRotation(t *testing.T) {
	ns := namespace(t)
	secret := annotated(`apiVersion: v1
kind: Secret
metadata:
  name: token
stringData:
  token: initial
`, map[string]string{v1alpha1.ApplyPolicyAnnotation: "IfNotPresent"})
	createVR(t, ns, "creds", secret)
	waitReady(t, ns, "creds")
	rotate := []byte(`{"data":{"token":"cm90YXRlZA=="}}`)
	if _, err := kube.CoreV1().Secrets(ns).Patch(t.Context(), "token", types.MergePatchType, rotate, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	reconciled(t, ns, "creds")
	s, err := kube.CoreV1().Secrets(ns).Get(t.Context(), "token", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Data["token"]) != "rotated" {
		t.Errorf("the rotated Secret was changed back: %q", s.Data["token"])
	}
	// Missing, it is created again from the manifest.
	if err := kube.CoreV1().Secrets(ns).Delete(t.Context(), "token", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, schemaSecrets, ns, "token", "was created again", func(o *unstructured.Unstructured) bool {
		v, _, _ := unstructured.NestedString(o.Object, "data", "token")
		return v == "aW5pdGlhbA==" // "initial"
	})
}

func TestPruneDisabledObjectSurvivesRemovalAndDeletion(t *testing.T) {
	ns := namespace(t)
	keep := annotated(configMap("keep", map[string]string{"a": "1"}), map[string]string{v1alpha1.PrunePolicyAnnotation: "disabled"})
	createVR(t, ns, "app", docs(keep, configMap("other", nil), configMap("stays", nil)))
	waitReady(t, ns, "app")

	// Removed from the manifest: kept, without Vidra's marks.
	updateVR(t, ns, "app", func(vr *v1alpha1.VidraResource) { vr.Spec.Manifest = configMap("stays", nil) })
	waitGone(t, configMaps, ns, "other", "was pruned")
	waitObject(t, configMaps, ns, "keep", "was released", func(o *unstructured.Unstructured) bool {
		_, marked := o.GetLabels()[v1alpha1.OwnerUIDLabel]
		return !marked
	})
	waitEvent(t, ns, "app", "Kept", "ConfigMap "+ns+"/keep")

	// Deleted with its resource: kept too.
	createVR(t, ns, "doomed", docs(annotated(configMap("keep2", nil), map[string]string{v1alpha1.PrunePolicyAnnotation: "disabled"}), configMap("gone", nil)))
	waitReady(t, ns, "doomed")
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitVRGone(t, ns, "doomed")
	waitGone(t, configMaps, ns, "gone", "was deleted with its resource")
	// The kept object is not counted as deleted.
	waitEvent(t, ns, "doomed", "Kept", "Kept 1 object whose annotation")
	waitEvent(t, ns, "doomed", "Deleted", "Deleted 1 managed object and let 1 go without deleting it")
	cm := waitObject(t, configMaps, ns, "keep2", "outlived its resource", exists)
	if _, marked := cm.GetLabels()[v1alpha1.OwnerUIDLabel]; marked {
		t.Errorf("the kept object still carries Vidra's marks: %v", cm.GetLabels())
	}
}

func TestIgnoredObjectIsNeverTouchedAgain(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "app", docs(configMap("legacy", map[string]string{"a": "1"}), configMap("stays", nil)))
	waitReady(t, ns, "app")
	updateVR(t, ns, "app", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Manifest = docs(annotated(configMap("legacy", map[string]string{"a": "1"}), map[string]string{v1alpha1.ApplyPolicyAnnotation: "Ignore"}), configMap("stays", nil))
	})
	waitVR(t, ns, "app", "dropped the ignored object from its inventory", func(vr *v1alpha1.VidraResource) bool {
		return isReady(vr) && len(vr.Status.ManagedResources) == 1 && vr.Status.ManagedResources[0].Name == "stays"
	})
	patch := []byte(`{"data":{"a":"theirs"}}`)
	if _, err := kube.CoreV1().ConfigMaps(ns).Patch(t.Context(), "legacy", types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	reconciled(t, ns, "app")
	if cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "legacy", metav1.GetOptions{}); err != nil || cm.Data["a"] != "theirs" {
		t.Errorf("the ignored object was changed: %v, %v", cm, err)
	}
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitVRGone(t, ns, "app")
	waitGone(t, configMaps, ns, "stays", "was deleted with its resource")
	waitObject(t, configMaps, ns, "legacy", "outlived its resource", exists)
}

func TestForceAnnotationRecreatesOnlyItsObject(t *testing.T) {
	ns := namespace(t)
	immutable := func(name, value string, force bool) string {
		doc := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\nimmutable: true\ndata:\n  v: %q\n", name, value)
		if force {
			doc = annotated(doc, map[string]string{v1alpha1.ForcePolicyAnnotation: "enabled"})
		}
		return doc
	}
	createVR(t, ns, "app", docs(immutable("forced", "1", true), immutable("plain", "1", false)))
	waitReady(t, ns, "app")
	forced := waitObject(t, configMaps, ns, "forced", "exists", exists)
	updateVR(t, ns, "app", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Manifest = docs(immutable("forced", "2", true), immutable("plain", "2", false))
	})
	waitVR(t, ns, "app", "failed on the plain object only", func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.ObservedGeneration == vr.Generation && c.Reason == v1alpha1.ReasonImmutableField && strings.Contains(c.Message, "plain") && !strings.Contains(c.Message, "forced")
	})
	waitObject(t, configMaps, ns, "forced", "was recreated with the new data", func(o *unstructured.Unstructured) bool {
		v, _, _ := unstructured.NestedString(o.Object, "data", "v")
		return o.GetUID() != forced.GetUID() && v == "2"
	})
}

func TestBadIgnoreRulesAndPolicyAnnotationsAreReported(t *testing.T) {
	ns := namespace(t)
	// The schema refuses a path that is not a JSON pointer.
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "bad-pointer", Namespace: ns}, Spec: v1alpha1.VidraResourceSpec{
		Manifest: configMap("a", nil), Ignore: []v1alpha1.IgnoreRule{{Paths: []string{"spec/replicas"}}},
	}}
	if _, err := vidra.InfrahubV1alpha1().VidraResources(ns).Create(t.Context(), vr, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "paths[0]") {
		t.Errorf("a malformed pointer was accepted: %v", err)
	}

	// What the schema cannot check is a condition and an Event.
	createVR(t, ns, "identity", configMap("a", nil), func(vr *v1alpha1.VidraResource) {
		vr.Spec.Ignore = []v1alpha1.IgnoreRule{{Paths: []string{"/metadata/name"}}, {Target: v1alpha1.IgnoreTarget{LabelSelector: "app in (a"}, Paths: []string{"/data"}}}
	})
	vrGot := waitVR(t, ns, "identity", "refused the rules", hasCondition(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidManifest))
	for _, f := range []string{"spec.ignore[0].paths[0]: /metadata/name holds the object's identity", "spec.ignore[1].target.labelSelector"} {
		if !strings.Contains(readyMessage(vrGot), f) {
			t.Errorf("Ready message %q lacks %q", readyMessage(vrGot), f)
		}
	}
	waitEvent(t, ns, "identity", "InvalidManifest", "spec.ignore[0].paths[0]")
	assertAbsent(t, ns, "a")

	// A broken manifest and a bad rule are reported in the same pass.
	createVR(t, ns, "both", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [}\n", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Ignore = []v1alpha1.IgnoreRule{{Paths: []string{"/metadata/namespace"}}}
	})
	vrGot = waitVR(t, ns, "both", "refused the manifest", hasCondition(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidManifest))
	for _, f := range []string{"document 1", "spec.ignore[0].paths[0]: /metadata/namespace"} {
		if !strings.Contains(readyMessage(vrGot), f) {
			t.Errorf("Ready message %q lacks %q", readyMessage(vrGot), f)
		}
	}

	failsWith(t, ns, "typo", annotated(configMap("b", nil), map[string]string{"vidra.infrahub.operators.com/prune": "off"}),
		v1alpha1.ReasonInvalidManifest, `document 1 (line 5): metadata.annotations["vidra.infrahub.operators.com/prune"]: "off" is not a value of this annotation`)
}

var schemaSecrets = corev1.SchemeGroupVersion.WithResource("secrets")

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

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

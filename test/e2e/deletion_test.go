// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller"
)

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

// TestForegroundDeletionWaitsForDependents: with spec.deletionPropagation
// Foreground, the resource's deletion ends only once the dependents of its
// objects are gone. A dependent a finalizer holds keeps it waiting (in the
// background, its owner would be gone at once, and the resource with it).
func TestForegroundDeletionWaitsForDependents(t *testing.T) {
	ns := namespace(t)
	createVR(t, ns, "fg", configMap("owner", nil), func(vr *v1alpha1.VidraResource) {
		vr.Spec.DeletionPropagation = v1alpha1.DeletionPropagationForeground
	})
	waitReady(t, ns, "fg")
	owner, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "owner", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dependent", Finalizers: []string{"example.com/hold"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID, BlockOwnerDeletion: ptr.To(true)}}}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), dependent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	release := func() error {
		_, err := kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), "dependent", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		return err
	}
	t.Cleanup(func() { _ = release() })
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "fg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, configMaps, ns, "owner", "was deleted in the foreground", func(o *unstructured.Unstructured) bool {
		return o.GetDeletionTimestamp() != nil && slices.Contains(o.GetFinalizers(), metav1.FinalizerDeleteDependents)
	})
	waitVR(t, ns, "fg", "waited for the ConfigMap its dependent holds, naming it", func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonDeleting && strings.HasSuffix(c.Message, ": ConfigMap "+ns+"/owner")
	})
	if err := release(); err != nil {
		t.Fatal(err)
	}
	waitVRGone(t, ns, "fg")
	waitGone(t, configMaps, ns, "dependent", "was deleted before its owner")
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

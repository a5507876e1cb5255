// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package reliability_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// TestSIGKILLBetweenApplyAndStatusLeavesNoOrphan: the operator creates an
// object, cannot record it (its status writes are refused, as when the
// process dies before them) and is killed with SIGKILL. The manifest then
// drops the object. The next process never read an inventory naming it, yet
// prunes it: it finds the objects that carry the resource's marks in its
// caches.
func TestSIGKILLBetweenApplyAndStatusLeavesNoOrphan(t *testing.T) {
	ns := namespace(t)
	cm := func(name string) string {
		return "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  key: v\n"
	}
	vrs := vidra.InfrahubV1alpha1().VidraResources(ns)
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: v1alpha1.VidraResourceSpec{Manifest: cm("kept") + cm("dropped")}}
	if _, err := vrs.Create(t.Context(), vr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allowStatus, err := testenv.RefuseStatusesNaming(t.Context(), kube, vidra, ns, "app", "dropped")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(allowStatus)

	op := startOperator(t, ns)
	waitRestored(t, "the ConfigMap created", time.Minute, configMapExists(ns, "dropped"))
	created, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "dropped", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	op.Kill()
	t.Logf("SIGKILL pid %d after it created the ConfigMap", op.PID())
	if got, err := vrs.Get(t.Context(), "app", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if len(got.Status.ManagedResources) != 0 {
		t.Fatalf("a status naming the object was written: %v", got.Status.ManagedResources)
	}

	allowStatus()
	err = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := vrs.Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cur.Spec.Manifest = cm("kept")
		_, err = vrs.Update(ctx, cur, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("drop the ConfigMap from the manifest: %v", err)
	}

	startOperator(t, ns)
	waitRestored(t, "the dropped ConfigMap pruned", time.Minute, func(ctx context.Context) bool {
		cur, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "dropped", metav1.GetOptions{})
		return apierrors.IsNotFound(err) || err == nil && cur.UID != created.UID
	})
	waitRestored(t, "the resource Ready with the kept ConfigMap alone", time.Minute, func(ctx context.Context) bool {
		cur, err := vrs.Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return false
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionReady)
		inv := cur.Status.ManagedResources
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == cur.Generation && len(inv) == 1 && inv[0].Name == "kept"
	})
}

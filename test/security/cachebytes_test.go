// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package security_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// markedConfigMaps creates n ConfigMaps name-0 … in ns carrying the marks
// of the resource owner (namespace/name) of uid, each with data of size
// bytes, workers at a time, and deletes them all, by their label attack,
// when the test ends.
func markedConfigMaps(t *testing.T, ns, name string, n, size, workers int, owner, uid string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = kube.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "attack=" + name})
	})
	data := strings.Repeat("x", size)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Labels: map[string]string{
					"attack":                name,
					v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue,
					v1alpha1.OwnerUIDLabel:  uid,
				}, Annotations: map[string]string{v1alpha1.OwnedByAnnotation: owner}},
				Data: map[string]string{"k": data},
			}
			if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil && t.Context().Err() == nil {
		t.Fatal(err)
	}
}

// restoredAfterDelete deletes ConfigMap name of ns (on the cluster the
// operator runs in, which the remote tests also name as their remote one)
// and waits until Vidra has created it again: the barrier that proves the
// ConfigMap informer handled every event before the delete.
func restoredAfterDelete(t *testing.T, ns, name string) time.Duration {
	t.Helper()
	old, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && cm.UID != old.UID, nil
	})
	if err != nil {
		t.Fatalf("ConfigMap %s/%s was not restored after its delete: %v", ns, name, err)
	}
	return time.Since(start)
}

// TestOwnLabelledObjectsAreNotCachedInFull: a tenant labels 64 ConfigMaps
// of 900 KiB with its own resource's marks, which its manifest does not
// declare. They were cached in full, 57 MiB of the shared operator's heap
// (1,000 of 1 MiB: a gibibyte). Now the operator holds a stub of each, its
// heap grows by less than 16 MiB, and the tenant's resource is unaffected;
// when its manifest declares one of them, Vidra reads it live and manages
// it.
func TestOwnLabelledObjectsAreNotCachedInFull(t *testing.T) {
	const (
		objects = 64
		size    = 900 << 10
		bound   = 16 << 20
	)
	ns := tenant(t)
	vr := createVR(t, ns, "app", cmDoc("declared"), asServiceAccount("deployer"))
	waitVR(t, ns, "app", "became Ready", isReady)

	before := memAfterGC().HeapAlloc
	markedConfigMaps(t, ns, "own", objects, size, 4, ns+"/app", string(vr.UID))
	restoredAfterDelete(t, ns, "declared")
	after := memAfterGC().HeapAlloc
	grew := int64(after) - int64(before)
	t.Logf("heap in use %d MiB before, %d MiB after %d labelled ConfigMaps of %d KiB: %+.1f MiB", before>>20, after>>20, objects, size>>10, float64(grew)/(1<<20))
	if grew > bound {
		t.Errorf("the operator's heap grew by %.1f MiB for objects the tenant labelled with its own resource's marks, more than %d MiB", float64(grew)/(1<<20), bound>>20)
	}
	got := waitVR(t, ns, "app", "Ready", isReady)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionCacheLimited); c != nil {
		t.Errorf("objects the resource does not declare count against its namespace: %+v", c)
	}

	// One of them is an object Vidra applied earlier (its managedFields say
	// so), still a stub; the manifest now declares it: Vidra reads it from
	// the API server, applies the manifest's data, and corrects its drift
	// on events.
	earlier := corev1ac.ConfigMap("own-0", ns).WithData(map[string]string{"k": "earlier"})
	if _, err := kube.CoreV1().ConfigMaps(ns).Apply(t.Context(), earlier, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManager, Force: true}); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"spec":{"manifest":%q}}`, cmDoc("declared")+"---\n"+cmDoc("own-0"))
	if _, err := vidra.InfrahubV1alpha1().VidraResources(ns).Patch(t.Context(), "app", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	got = waitVR(t, ns, "app", "Ready with the declared stub", func(vr *v1alpha1.VidraResource) bool {
		return isReady(vr) && vr.Status.ObservedGeneration == vr.Generation && vr.Status.ManagedCount == 2
	})
	t.Logf("Ready: %s", meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message)
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "own-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["k"] != "v" {
		t.Fatalf("own-0 holds %d bytes under k, want the manifest's v", len(cm.Data["k"]))
	}
	cm.Data["k"] = "edited"
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "own-0", metav1.GetOptions{})
		return err == nil && cm.Data["k"] == "v", nil
	})
	if err != nil {
		t.Errorf("the edit of own-0, now declared, was not corrected: %v", err)
	}
}

// TestForeignMarksOnASharedClusterCostAnotherTenantNothing: team-a and
// team-b deploy to the same remote cluster. team-b creates 10,001
// ConfigMaps there with Vidra's marks and made-up owners. They were
// charged to every namespace whose resources watch that cluster, and left
// team-a's resource over its cache budget, unwatched, for good. Now they
// are stubs no tenant pays for: team-a's resource stays Ready and its
// drift is still corrected on events.
func TestForeignMarksOnASharedClusterCostAnotherTenantNothing(t *testing.T) {
	const objects = 10_001
	kc, err := env.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	teamA := tenantNamespace(t)
	if _, err := kube.CoreV1().Secrets(teamA).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "shared-cluster"}, Data: map[string][]byte{"kubeconfig": kc},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	serviceAccount(t, teamA, "writer")
	grant(t, teamA, "writer", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}})
	grant(t, teamA, "writer", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"shared-cluster"}, Verbs: []string{"get"}})
	createVR(t, teamA, "app", cmDoc("settings"), asServiceAccount("writer"), func(vr *v1alpha1.VidraResource) {
		vr.Spec.Destination.Server = env.Config.Host
		vr.Spec.Destination.KubeconfigSecretRef = &v1alpha1.SecretKeyReference{Name: "shared-cluster", Key: "kubeconfig"}
	})
	waitVR(t, teamA, "app", "became Ready on the shared cluster", isReady)

	teamB := tenantNamespace(t)
	start := time.Now()
	markedConfigMaps(t, teamB, "ghost", objects, 16, 16, teamB+"/ghost", "00000000-0000-0000-0000-00000000beef")
	t.Logf("team-b created %d marked ConfigMaps in %v", objects, time.Since(start).Round(time.Second))

	// Every event of team-b's objects came before the delete's.
	// The repair comes from the watch: a held cluster's resource waits
	// for the hold's end (30 s) or its interval.
	const repair = 15 * time.Second
	took := restoredAfterDelete(t, teamA, "settings")
	t.Logf("team-a's deleted ConfigMap was restored in %v", took.Round(time.Millisecond))
	if took > repair {
		t.Errorf("team-a's ConfigMap took %v to be restored, more than %v: its cluster is not watched", took, repair)
	}
	at := askReconcile(t, teamA, "app")
	vr := waitVR(t, teamA, "app", "handled the reconcile asked for", func(vr *v1alpha1.VidraResource) bool {
		return vr.Status.LastHandledReconcileAt == at
	})
	if !isReady(vr) {
		t.Errorf("team-a's resource is not Ready after team-b's objects: %+v", meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady))
	}
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionCacheLimited); c != nil {
		t.Errorf("team-b's objects count against team-a's cache budget: %+v", c)
	}
	if took := restoredAfterDelete(t, teamA, "settings"); took > repair {
		t.Errorf("team-a's ConfigMap took %v to be restored the second time, more than %v", took, repair)
	}
}

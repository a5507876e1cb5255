// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package security_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// pruneConfigMap is a ConfigMap as YAML, in namespace ns ("" for the
// resource's default one).
func pruneConfigMap(ns, name, value string) string {
	s := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
	if ns != "" {
		s += "  namespace: " + ns + "\n"
	}
	return s + "data:\n  key: " + value + "\n"
}

// pruneRoleBinding binds ServiceAccount ns/reader to ClusterRole view in ns.
func pruneRoleBinding(ns, name string) string {
	return fmt.Sprintf("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: %s\n  namespace: %s\n"+
		"roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: view\n"+
		"subjects:\n- kind: ServiceAccount\n  name: reader\n  namespace: %s\n", name, ns, ns)
}

// updateVR changes a resource's spec with mutate, retrying conflicts.
func updateVR(t *testing.T, ns, name string, mutate func(*v1alpha1.VidraResource)) {
	t.Helper()
	testenv.UpdateVR(t, vidra, ns, name, mutate)
}

// deleteOnCleanup deletes a resource of the operator's namespace when the
// test ends, and waits until its finalizer has cleaned up.
func deleteOnCleanup(t *testing.T, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = vidra.InfrahubV1alpha1().VidraResources(operatorNamespace).Delete(ctx, name, metav1.DeleteOptions{})
		_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := vidra.InfrahubV1alpha1().VidraResources(operatorNamespace).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})
}

// freeze sets immutable: true on ConfigMap ns/name as ServiceAccount
// ns/deployer, which may edit ns, under field manager manager.
func freeze(t *testing.T, ns, name, manager string) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":deployer"}
	tenantClient := kubernetes.NewForConfigOrDie(cfg)
	if _, err := tenantClient.CoreV1().ConfigMaps(ns).Patch(t.Context(), name, types.MergePatchType, []byte(`{"immutable":true}`),
		metav1.PatchOptions{FieldManager: manager}); err != nil {
		t.Fatalf("the tenant could not freeze ConfigMap %s/%s: %v", ns, name, err)
	}
}

// A tenant who may patch one object a platform resource manages (a shared
// ConfigMap in its namespace) makes it immutable. The platform's next
// manifest changes that ConfigMap's data, drops a RoleBinding, and moves a
// ConfigMap of the same name out of the operator's namespace. The frozen
// ConfigMap fails, naming the tenant's field manager; the ConfigMap of the
// same kind and name is held (it may be the failing one, moved), and the
// status and a PruneHeld Event say so; the RoleBinding is pruned all the
// same.
func TestATenantFreezingAConfigMapDoesNotHoldOtherPrunes(t *testing.T) {
	ns := tenant(t)
	platform := "platform-" + ns
	shared := "shared-" + ns
	first := pruneConfigMap(ns, shared, "one") + pruneConfigMap(operatorNamespace, shared, "one") + pruneRoleBinding(ns, "readers")
	createVR(t, operatorNamespace, platform, first)
	deleteOnCleanup(t, platform)
	waitVR(t, operatorNamespace, platform, "became Ready", isReady)
	if getObject(t, roleBindings, ns, "readers") == nil {
		t.Fatal("the RoleBinding was not created")
	}

	freeze(t, ns, shared, "tenant-freeze")
	setManifest(t, operatorNamespace, platform, pruneConfigMap(ns, shared, "two"))

	waitObject(t, roleBindings, ns, "readers", "pruned", func(o *unstructured.Unstructured) bool { return o == nil })
	vr := waitVR(t, operatorNamespace, platform, "reported the frozen ConfigMap and the held prune",
		hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonImmutableSet))
	msg := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady).Message
	for _, want := range []string{
		"1 prune held back", "ConfigMap " + operatorNamespace + "/" + shared, "ConfigMap " + ns + "/" + shared + " fails",
		"field manager tenant-freeze", v1alpha1.ForcePolicyAnnotation,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Ready message %q does not say %q", msg, want)
		}
	}
	waitWarningEvent(t, operatorNamespace, platform, v1alpha1.ReasonPruneHeld, "ConfigMap "+operatorNamespace+"/"+shared)
	if getObject(t, configMaps, operatorNamespace, shared) == nil {
		t.Error("the ConfigMap of the failing one's kind and name was pruned, not held")
	}
	if inv := vr.Status.ManagedResources; len(inv) != 2 {
		t.Errorf("inventory %v, want the failing ConfigMap and the held one", inv)
	}
}

// Under spec.force, a ConfigMap someone else made immutable is recreated
// from the manifest, without the flag.
func TestAConfigMapMadeImmutableByATenantIsRecreatedUnderForce(t *testing.T) {
	ns := tenant(t)
	platform := "forced-" + ns
	createVR(t, operatorNamespace, platform, pruneConfigMap(ns, "shared", "one"), func(vr *v1alpha1.VidraResource) { vr.Spec.Force = true })
	deleteOnCleanup(t, platform)
	waitVR(t, operatorNamespace, platform, "became Ready", isReady)
	before := getObject(t, configMaps, ns, "shared")

	freeze(t, ns, "shared", "tenant-freeze")
	waitObject(t, configMaps, ns, "shared", "recreated without immutable", func(o *unstructured.Unstructured) bool {
		if o == nil || o.GetUID() == before.GetUID() {
			return false
		}
		frozen, _, _ := unstructured.NestedBool(o.Object, "immutable")
		return !frozen
	})
	waitWarningEvent(t, operatorNamespace, platform, v1alpha1.ReasonImmutableSet, "field manager tenant-freeze")
	waitVR(t, operatorNamespace, platform, "Ready again", isReady)
}

// refuseStatusesNaming installs, for the test, an admission policy (no
// webhook) that refuses every status write of a VidraResource of ns whose
// inventory names an object called name, and waits until it acts.
func refuseStatusesNaming(t *testing.T, ns, vrName, name string) {
	t.Helper()
	remove, err := testenv.RefuseStatusesNaming(t.Context(), kube, vidra, ns, vrName, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
}

// A reconcile creates an object and its status write is refused; the next
// manifest drops the object. Although no status ever recorded it, it is
// pruned: the inventory written is a superset of what was written.
func TestAnObjectWhoseStatusWriteFailedIsPrunedOnceDropped(t *testing.T) {
	ns := tenant(t)
	manifest := pruneConfigMap("", "app", "v") + pruneConfigMap("", "dropped", "v")
	createVR(t, ns, "raced", manifest, asServiceAccount("deployer"), func(vr *v1alpha1.VidraResource) { vr.Spec.Suspend = true })
	waitVR(t, ns, "raced", "suspended", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSuspended))
	refuseStatusesNaming(t, ns, "raced", "dropped")

	updateVR(t, ns, "raced", func(vr *v1alpha1.VidraResource) { vr.Spec.Suspend = false })
	created := waitObject(t, configMaps, ns, "dropped", "created", func(o *unstructured.Unstructured) bool { return o != nil })
	if vr, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(t.Context(), "raced", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if len(vr.Status.ManagedResources) != 0 {
		t.Fatalf("a status naming the object was written: %v", vr.Status.ManagedResources)
	}

	setManifest(t, ns, "raced", pruneConfigMap("", "app", "v"))
	waitObject(t, configMaps, ns, "dropped", "pruned", func(o *unstructured.Unstructured) bool { return o == nil || o.GetUID() != created.GetUID() })
	vr := waitVR(t, ns, "raced", "Ready", isReady)
	if inv := vr.Status.ManagedResources; len(inv) != 1 || inv[0].Name != "app" {
		t.Errorf("inventory %v, want the declared ConfigMap alone", inv)
	}
}

// A status that lost its inventory (the operator killed between an apply
// and its status write, or the status written over) forgets nothing: the
// objects that carry the resource's marks and Vidra's apply are found in
// the cache, and pruned once the manifest drops them.
func TestAnObjectALostStatusForgotIsPrunedOnceDropped(t *testing.T) {
	ns := tenant(t)
	createVR(t, ns, "forgetful", pruneConfigMap("", "app", "v")+pruneConfigMap("", "dropped", "v"), asServiceAccount("deployer"))
	waitVR(t, ns, "forgetful", "became Ready", isReady)
	created := getObject(t, configMaps, ns, "dropped")

	// Suspended, nothing writes the inventory back while it is lost.
	updateVR(t, ns, "forgetful", func(vr *v1alpha1.VidraResource) { vr.Spec.Suspend = true })
	waitVR(t, ns, "forgetful", "suspended", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSuspended))
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		vr, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(ctx, "forgetful", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		vr.Status.ManagedResources, vr.Status.ManagedCount = nil, 0
		_, err = vidra.InfrahubV1alpha1().VidraResources(ns).UpdateStatus(ctx, vr, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("reset the inventory: %v", err)
	}

	updateVR(t, ns, "forgetful", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Manifest, vr.Spec.Suspend = pruneConfigMap("", "app", "v"), false
	})
	waitObject(t, configMaps, ns, "dropped", "pruned", func(o *unstructured.Unstructured) bool { return o == nil || o.GetUID() != created.GetUID() })
	waitVR(t, ns, "forgetful", "Ready", isReady)
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// tenant creates ServiceAccount "tenant" in ns with rights on ConfigMaps of
// ns only and returns its user name.
func tenant(t *testing.T, ns string) string {
	t.Helper()
	user, err := testenv.CreateConfigMapTenant(t.Context(), kube, ns, "tenant")
	if err != nil {
		t.Fatal(err)
	}
	return user
}

func asTenant(vr *v1alpha1.VidraResource) { vr.Spec.ServiceAccountName = "tenant" }

// tenantFails creates a resource acting as the tenant and waits until it
// reports Forbidden, in its condition and in an Event, naming each fragment.
func tenantFails(t *testing.T, ns, name, manifest string, fragments ...string) *v1alpha1.VidraResource {
	t.Helper()
	createVR(t, ns, name, manifest, asTenant)
	vr := failsWithMessage(t, ns, name, v1alpha1.ReasonForbidden, fragments...)
	waitEvent(t, ns, name, "ApplyFailed", fragments[0])
	return vr
}

func TestTenantServiceAccountAppliesAndPrunesInItsNamespace(t *testing.T) {
	ns := namespace(t)
	tenant(t, ns)
	// Rights granted to the ServiceAccounts of the namespace as a group
	// reach the impersonated ServiceAccount too.
	if _, err := kube.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "group-services"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "create", "patch", "delete"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "group-services"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "group-services"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:serviceaccounts:" + ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createVR(t, ns, "mine", docs(configMap("a", map[string]string{"k": "v"}), configMap("b", nil), serviceDoc), asTenant)
	waitReady(t, ns, "mine")
	waitObject(t, configMaps, ns, "a", "was applied", exists)
	waitObject(t, services, ns, "web", "was applied", exists)

	// Drift repair and prune go through the ServiceAccount too.
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, configMaps, ns, "a", "was restored", exists)
	updateVR(t, ns, "mine", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Manifest = docs(configMap("a", map[string]string{"k": "v"}), serviceDoc)
	})
	waitGone(t, configMaps, ns, "b", "was pruned")
	waitReady(t, ns, "mine")
}

func TestTenantServiceAccountCannotCreateClusterScopedObject(t *testing.T) {
	ns := namespace(t)
	user := tenant(t, ns)
	target := ns + "-grab"
	vr := tenantFails(t, ns, "cluster", fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", target), "Namespace "+target, user,
		"needs get, create, patch and delete on namespaces cluster-wide (a ClusterRole and a ClusterRoleBinding)")
	if !strings.Contains(strings.ToLower(readyMessage(vr)), "forbidden") {
		t.Errorf("message does not say forbidden: %q", readyMessage(vr))
	}
	// Retried, it still fails: nothing creates the namespace.
	reconciled(t, ns, "cluster")
	if _, err := kube.CoreV1().Namespaces().Get(t.Context(), target, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the tenant's namespace was created (err %v)", err)
	}
}

func TestTenantServiceAccountCannotWriteToAnotherNamespace(t *testing.T) {
	ns := namespace(t)
	other := namespace(t)
	user := tenant(t, ns)
	theirs := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: theirs\n  namespace: %s\ndata:\n  k: v\n", other)
	tenantFails(t, ns, "reach", docs(configMap("mine", nil), theirs), "ConfigMap "+other+"/theirs", user,
		"Vidra writes it as ServiceAccount "+ns+"/tenant, which needs get, create, patch and delete on configmaps in namespace "+other+" (a Role and a RoleBinding there)")
	// What it may write is applied; what it may not is not.
	waitObject(t, configMaps, ns, "mine", "was applied", exists)
	// Retried, it still writes nothing there.
	reconciled(t, ns, "reach")
	if _, err := kube.CoreV1().ConfigMaps(other).Get(t.Context(), "theirs", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the tenant wrote to another namespace (err %v)", err)
	}
}

// An object that Vidra manages for someone else sits in the operator's
// caches; a tenant aiming at it must get what its own identity gets (no
// access), not a Conflict naming the other owner.
func TestTenantLearnsNothingFromTheOperatorsCaches(t *testing.T) {
	ns := namespace(t)
	other := namespace(t)
	createVR(t, other, "owner", configMap("private", map[string]string{"secret": "s"}))
	waitReady(t, other, "owner")
	user := tenant(t, ns)
	target := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: private\n  namespace: %s\n", other)
	vr := tenantFails(t, ns, "peek", target, "ConfigMap "+other+"/private", user)
	if msg := readyMessage(vr); strings.Contains(msg, other+"/owner") {
		t.Errorf("the message reveals the owner: %q", msg)
	}
	cm := waitObject(t, configMaps, other, "private", "exists", exists)
	if d, _, _ := unstructured.NestedStringMap(cm.Object, "data"); d["secret"] != "s" || cm.GetAnnotations()[v1alpha1.OwnedByAnnotation] != other+"/owner" {
		t.Fatalf("the object was touched: %v", cm.Object)
	}
}

// A typo in spec.serviceAccountName makes the API server refuse every write
// as a permission problem; the resource says the ServiceAccount is missing.
func TestMissingServiceAccountIsNamedNotReportedAsForbidden(t *testing.T) {
	ns := namespace(t)
	tenant(t, ns)
	createVR(t, ns, "typo", configMap("never", nil), func(vr *v1alpha1.VidraResource) { vr.Spec.ServiceAccountName = "tenat" })
	vr := failsWithMessage(t, ns, "typo", v1alpha1.ReasonServiceAccountNotFound, "ServiceAccount "+ns+"/tenat does not exist")
	if strings.Contains(readyMessage(vr), "cannot patch") {
		t.Errorf("message still reports a permission problem: %q", readyMessage(vr))
	}
	waitEvent(t, ns, "typo", v1alpha1.ReasonServiceAccountNotFound, "does not exist")
	// Creating it (with rights) is all it takes.
	updateVR(t, ns, "typo", func(vr *v1alpha1.VidraResource) { vr.Spec.ServiceAccountName = "tenant" })
	waitReady(t, ns, "typo")
}

// A resource that never applied anything is deleted at once, even when its
// identity may not even read what the manifest names.
func TestResourceThatAppliedNothingIsDeletedWithoutCleanup(t *testing.T) {
	ns := namespace(t)
	tenant(t, ns)
	createVR(t, ns, "nothing", serviceDoc, asTenant)
	failsWithMessage(t, ns, "nothing", v1alpha1.ReasonForbidden, "services")
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "nothing", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, vrResource, ns, "nothing", "was deleted")
}

// Deleting a tenant's namespace deletes, in no set order, the RoleBinding
// that lets the resource's ServiceAccount act and the resource itself: its
// cleanup, refused as that ServiceAccount, must leave the objects to the
// namespace's deletion rather than hold the namespace in Terminating.
func TestTenantNamespaceDeletedWithItsRBACIsNotHeld(t *testing.T) {
	ns := tenantAppThenRevoke(t)
	if err := kube.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, vrResource, ns, "app", "was deleted")
	waitGone(t, namespaces, "", ns, "was deleted")
}

// A cleanup its ServiceAccount may no longer do says so in the status, where
// kubectl get shows it, not only in an Event; Orphan then lets it finish.
func TestCleanupRefusedShowsInTheStatus(t *testing.T) {
	ns := tenantAppThenRevoke(t)
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitVR(t, ns, "app", "Ready False, Deleting, naming the refusal and the way out", func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonDeleting &&
			c.ObservedGeneration == vr.Generation && vr.Status.ObservedGeneration == vr.Generation &&
			strings.Contains(c.Message, "forbidden") && strings.Contains(c.Message, "deletionPolicy to Orphan")
	})
	waitEvent(t, ns, "app", "CleanupFailed", "forbidden")
	updateVR(t, ns, "app", func(vr *v1alpha1.VidraResource) { vr.Spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan })
	waitGone(t, vrResource, ns, "app", "was deleted once orphaning")
	waitObject(t, configMaps, ns, "a", "was left in place", exists)
}

// tenantAppThenRevoke creates resource "app" of a ConfigMap acting as the
// tenant, waits until it is Ready, then takes the tenant's rights away.
func tenantAppThenRevoke(t *testing.T) string {
	t.Helper()
	ns := namespace(t)
	tenant(t, ns)
	createVR(t, ns, "app", configMap("a", nil), asTenant)
	waitReady(t, ns, "app")
	if err := kube.RbacV1().RoleBindings(ns).Delete(t.Context(), "tenant-configmaps", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// A resource whose manifest declares an object its ServiceAccount may not
// even read (its apply was refused) is deleted without waiting for that
// object: the identity cannot have created it.
func TestDeletionDoesNotWaitForAnObjectTheIdentityMayNotRead(t *testing.T) {
	ns, other := namespace(t), namespace(t)
	tenant(t, ns)
	elsewhere := strings.Replace(configMap("elsewhere", nil), "metadata:\n", "metadata:\n  namespace: "+other+"\n", 1)
	createVR(t, ns, "app", docs(configMap("a", nil), elsewhere), asTenant)
	failsWithMessage(t, ns, "app", v1alpha1.ReasonForbidden, "elsewhere")
	waitObject(t, configMaps, ns, "a", "was applied", exists)
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, vrResource, ns, "app", "was deleted")
	waitGone(t, configMaps, ns, "a", "was deleted with it")
	waitEvent(t, ns, "app", "CleanupSkipped", other+"/elsewhere")
}

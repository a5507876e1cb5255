// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package security_test

import (
	"fmt"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

var roleBindings = schema.GroupVersionResource{Group: rbacv1.GroupName, Version: "v1", Resource: "rolebindings"}

// bindClusterRole binds ClusterRole role, in ns, to ServiceAccount saNs/sa.
func bindClusterRole(t *testing.T, ns, role, saNs, sa string) {
	t.Helper()
	if _, err := kube.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%s", role, saNs, sa)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: saNs}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// grantAccess is a RoleBinding, as YAML, that gives ServiceAccount
// saNs/deployer ClusterRole edit in ns: the temporary access a platform
// team grants a tenant and revokes later.
func grantAccess(name, ns, saNs string) string {
	return fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: %s
  namespace: %s
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects:
- {kind: ServiceAccount, name: deployer, namespace: %s}
`, name, ns, saNs)
}

// A tenant whose ServiceAccount may only read RoleBindings of a namespace
// declares the RoleBinding a platform resource granted it there. Declaring
// an object takes no more than reading it, so when the platform revokes the
// access (removes the RoleBinding from its manifest, or deletes its resource)
// the RoleBinding must be deleted, not handed over to the tenant, whose
// identity could never have written or deleted it.
func TestReadOnlyClaimantDoesNotKeepARevokedRoleBinding(t *testing.T) {
	victim := tenantNamespace(t)
	attacker := tenantNamespace(t)
	serviceAccount(t, attacker, "deployer", attacker)
	// An auditor's right: read the victim's RoleBindings, nothing more.
	if _, err := kube.RbacV1().Roles(victim).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "read-rolebindings"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(victim).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "read-rolebindings"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-rolebindings"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "deployer", Namespace: attacker}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The platform team grants two accesses from the trusted namespace: one
	// it revokes by editing its manifest, one by deleting its resource.
	platform := "grant-" + victim
	deleteResourcesAtEnd(t, operatorNamespace, platform)
	marker := ownershipConfigMap(platform, map[string]string{"k": "v"})
	createVR(t, operatorNamespace, platform, grantAccess("edited-out", victim, attacker)+"---\n"+grantAccess("deleted-with", victim, attacker)+"---\n"+marker)
	waitVR(t, operatorNamespace, platform, "became Ready", isReady)

	// The tenant declares both, and is told the platform owns them.
	createVR(t, attacker, "keep", grantAccess("edited-out", victim, attacker), asServiceAccount("deployer"))
	createVR(t, attacker, "keep-too", grantAccess("deleted-with", victim, attacker), asServiceAccount("deployer"))
	waitVR(t, attacker, "keep", "reported the other owner", conflictWith(v1alpha1.ReasonOwnedByOther))
	waitVR(t, attacker, "keep-too", "reported the other owner", conflictWith(v1alpha1.ReasonOwnedByOther))

	edited := getObject(t, roleBindings, victim, "edited-out")
	setManifest(t, operatorNamespace, platform, grantAccess("deleted-with", victim, attacker)+"---\n"+marker)
	waitObject(t, roleBindings, victim, "edited-out", "was deleted once revoked", func(o *unstructured.Unstructured) bool {
		return o == nil || o.GetUID() != edited.GetUID()
	})
	if o := getObject(t, roleBindings, victim, "edited-out"); o != nil {
		t.Fatalf("the revoked RoleBinding was created again: %v", o)
	}
	waitVR(t, operatorNamespace, platform, "reconciled the revocation", func(vr *v1alpha1.VidraResource) bool {
		return isReady(vr) && !inInventory(vr, "RoleBinding", "edited-out")
	})
	// The tenant is told why it did not get the object, and its own
	// identity cannot create it.
	waitWarningEvent(t, attacker, "keep", v1alpha1.ReasonHandoverRefused, "ServiceAccount "+attacker+"/deployer may not patch it; it was deleted")
	vr := waitVR(t, attacker, "keep", "reported that it may not create it", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonForbidden))
	if inInventory(vr, "RoleBinding", "edited-out") {
		t.Errorf("the tenant's inventory holds the revoked RoleBinding: %v", vr.Status.ManagedResources)
	}

	// Deleting the platform's resource (deletionPolicy Delete) deletes the
	// other one, claimed as well.
	if err := vidra.InfrahubV1alpha1().VidraResources(operatorNamespace).Delete(t.Context(), platform, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeleted(t, operatorNamespace, platform)
	if o := getObject(t, roleBindings, victim, "deleted-with"); o != nil {
		t.Fatalf("RoleBinding %s/deleted-with outlived the resource that granted it: labels %v", victim, o.GetLabels())
	}
	waitWarningEvent(t, attacker, "keep-too", v1alpha1.ReasonHandoverRefused, "it was deleted")
}

// The other side: a resource whose ServiceAccount may manage the object
// (ClusterRole admin in its namespace covers RoleBindings) still receives
// it when the platform lets it go, with its UID, never absent.
func TestClaimantThatMayManageTheObjectReceivesIt(t *testing.T) {
	team := tenantNamespace(t)
	serviceAccount(t, team, "deployer")
	bindClusterRole(t, team, "admin", team, "deployer")

	platform := "grant-" + team
	deleteResourcesAtEnd(t, operatorNamespace, platform)
	marker := ownershipConfigMap(platform, map[string]string{"k": "v"})
	createVR(t, operatorNamespace, platform, grantAccess("access", team, team)+"---\n"+marker)
	waitVR(t, operatorNamespace, platform, "became Ready", isReady)
	granted := getObject(t, roleBindings, team, "access")

	claimant := createVR(t, team, "own", grantAccess("access", team, team), asServiceAccount("deployer"))
	waitVR(t, team, "own", "reported the other owner", conflictWith(v1alpha1.ReasonOwnedByOther))

	setManifest(t, operatorNamespace, platform, marker)
	got := waitObject(t, roleBindings, team, "access", "was handed over", func(o *unstructured.Unstructured) bool {
		return o == nil || o.GetLabels()[v1alpha1.OwnerUIDLabel] == string(claimant.UID)
	})
	if got == nil || got.GetUID() != granted.GetUID() {
		t.Fatalf("the RoleBinding was deleted or replaced rather than handed over: %v", got)
	}
	vr := waitVR(t, team, "own", "became Ready, owning the object", isReady)
	if !inInventory(vr, "RoleBinding", "access") {
		t.Errorf("the RoleBinding is not in the inventory of the resource it was handed to: %v", vr.Status.ManagedResources)
	}
	if refused := eventsOn(t, team, "own", v1alpha1.ReasonHandoverRefused); len(refused) > 0 {
		t.Errorf("a handover refusal was reported: %q", refused)
	}
}

// A tenant whose ServiceAccount may patch and delete the RoleBindings of its
// namespace, but holds nothing of what a RoleBinding there grants and may
// not bind its role, declares the RoleBinding a platform resource made for
// a group of people. The API server would refuse that identity any write
// of the binding, even of its labels; the hand-over's patch is the
// operator's, which the check does not stop. So when the platform revokes
// the binding it must be deleted, not handed over: the tenant would
// otherwise keep a grant it could never have made.
func TestClaimantThatMayNotGrantABindingDoesNotKeepIt(t *testing.T) {
	team := tenantNamespace(t)
	serviceAccount(t, team, "deployer")
	grant(t, team, "deployer", rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"},
		Verbs: []string{"get", "list", "watch", "create", "patch", "update", "delete"}})
	if _, err := kube.RbacV1().Roles(team).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "exec"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/exec"}, Verbs: []string{"create"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: devs-exec
  namespace: %s
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: exec}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: devs}
`, team)

	platform := "grant-" + team
	deleteResourcesAtEnd(t, operatorNamespace, platform)
	marker := ownershipConfigMap(platform, map[string]string{"k": "v"})
	createVR(t, operatorNamespace, platform, binding+"---\n"+marker)
	waitVR(t, operatorNamespace, platform, "became Ready", isReady)
	granted := getObject(t, roleBindings, team, "devs-exec")

	createVR(t, team, "keep", binding, asServiceAccount("deployer"))
	waitVR(t, team, "keep", "reported the other owner", conflictWith(v1alpha1.ReasonOwnedByOther))

	setManifest(t, operatorNamespace, platform, marker)
	waitObject(t, roleBindings, team, "devs-exec", "was deleted once revoked", func(o *unstructured.Unstructured) bool {
		return o == nil || o.GetUID() != granted.GetUID()
	})
	waitWarningEvent(t, team, "keep", v1alpha1.ReasonHandoverRefused, "ServiceAccount "+team+"/deployer may not write it (the API server refused, as that identity, a dry run")
	// Nor can the tenant's identity create it.
	waitVR(t, team, "keep", "reported that it may not create it", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonForbidden))
	if o := getObject(t, roleBindings, team, "devs-exec"); o != nil {
		t.Fatalf("the revoked RoleBinding exists again, labels %v", o.GetLabels())
	}
}

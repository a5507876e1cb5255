// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package security_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// TestTenantCannotBorrowOperatorIdentity: a tenant who may only create
// VidraResources in its namespace declares a ClusterRole granting
// everything and binds it to itself. Without a ServiceAccount, outside the
// trusted namespace, Vidra applies nothing and says the three ways out;
// deleting the resource finishes at once.
func TestTenantCannotBorrowOperatorIdentity(t *testing.T) {
	ns := tenantNamespace(t)
	role := "grab-" + ns
	manifest := fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: %[1]s
rules:
  - apiGroups: ["*"]
    resources: ["*"]
    verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: %[1]s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: %[1]s
subjects:
  - kind: User
    apiGroup: rbac.authorization.k8s.io
    name: mallory
`, role)
	createVR(t, ns, "grab", manifest)

	// The condition is written by the reconcile that handled the resource:
	// anything it would have applied, it would have applied before.
	vr := waitVR(t, ns, "grab", "reported ServiceAccountRequired", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonServiceAccountRequired))
	if !hasCondition(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonServiceAccountRequired)(vr) {
		t.Errorf("not Stalled: %+v", vr.Status.Conditions)
	}
	msg := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady).Message
	for _, want := range []string{"spec.serviceAccountName", "--default-service-account", "--trusted-namespaces", ns} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message does not name %q: %s", want, msg)
		}
	}
	if len(vr.Status.ManagedResources) != 0 {
		t.Errorf("inventory: %+v", vr.Status.ManagedResources)
	}
	if _, err := kube.RbacV1().ClusterRoles().Get(t.Context(), role, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ClusterRole: %v, want NotFound", err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Get(t.Context(), role, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ClusterRoleBinding: %v, want NotFound", err)
	}
	waitEventOn(t, ns, "grab", v1alpha1.ReasonServiceAccountRequired, "--trusted-namespaces")

	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "grab", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeleted(t, ns, "grab")
}

// TestTenantCannotUseTheOperatorsLegacyKubeconfig: the administrators keep
// a cluster-kubeconfig Secret in the operator's namespace. A tenant naming
// its server gets nothing from it, even acting as a ServiceAccount of its
// own; the operator's namespace still does.
func TestTenantCannotUseTheOperatorsLegacyKubeconfig(t *testing.T) {
	kc, err := env.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	secret := "legacy-admin-" + fmt.Sprint(time.Now().UnixNano())
	if _, err := kube.CoreV1().Secrets(operatorNamespace).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret, Labels: map[string]string{"cluster-kubeconfig": "127.0.0.1"}},
		Data:       map[string][]byte{"kubeconfig": kc},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.CoreV1().Secrets(operatorNamespace).Delete(context.Background(), secret, metav1.DeleteOptions{})
	})
	server := env.Config.Host

	ns := tenantNamespace(t)
	serviceAccount(t, ns, "deployer", ns)
	target := "prod-" + ns
	createVR(t, ns, "prod", fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", target), asServiceAccount("deployer"), func(vr *v1alpha1.VidraResource) {
		vr.Spec.Destination.Server = server
	})
	vr := waitVR(t, ns, "prod", "refused the operator's Secret", hasCondition(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonDestinationError))
	msg := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady).Message
	if !strings.Contains(msg, "trusted namespaces") || !strings.Contains(msg, "kubeconfigSecretRef") || strings.Contains(msg, secret) {
		t.Errorf("message %q should refuse for trust, say what to do, and not name the Secret", msg)
	}
	if _, err := kube.CoreV1().Namespaces().Get(t.Context(), target, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s: %v, want NotFound", target, err)
	}

	// The control: the same destination works for the trusted namespace.
	mine := "legacy-" + ns
	createVR(t, operatorNamespace, mine, cmDoc(mine), func(vr *v1alpha1.VidraResource) { vr.Spec.Destination.Server = server })
	t.Cleanup(func() {
		_ = vidra.InfrahubV1alpha1().VidraResources(operatorNamespace).Delete(context.Background(), mine, metav1.DeleteOptions{})
	})
	waitVR(t, operatorNamespace, mine, "became Ready through the legacy Secret", isReady)
}

// TestTenantCannotUseASecretItsServiceAccountMayNotRead: the kubeconfig
// Secret a resource names is used only if the identity it acts as may read
// it; Vidra's own right to read every Secret is not lent out.
func TestTenantCannotUseASecretItsServiceAccountMayNotRead(t *testing.T) {
	kc, err := env.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	ns := tenantNamespace(t)
	if _, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "admin-kubeconfig"},
		Data:       map[string][]byte{"kubeconfig": kc},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// "writer" may write ConfigMaps of its namespace, and read no Secret.
	serviceAccount(t, ns, "writer")
	grant(t, ns, "writer", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}})
	toSecret := func(vr *v1alpha1.VidraResource) {
		vr.Spec.Destination.Server = env.Config.Host
		vr.Spec.Destination.KubeconfigSecretRef = &v1alpha1.SecretKeyReference{Name: "admin-kubeconfig", Key: "kubeconfig"}
	}
	createVR(t, ns, "borrow", cmDoc("borrowed"), asServiceAccount("writer"), toSecret)
	vr := waitVR(t, ns, "borrow", "refused the Secret", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonForbidden))
	msg := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady).Message
	for _, want := range []string{ns + "/writer", "Secret " + ns + "/admin-kubeconfig"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message does not name %q: %s", want, msg)
		}
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "borrowed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ConfigMap: %v, want NotFound", err)
	}

	// Allowed to read that one Secret, the same ServiceAccount uses it.
	grant(t, ns, "writer", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"admin-kubeconfig"}, Verbs: []string{"get"}})
	askReconcile(t, ns, "borrow")
	waitVR(t, ns, "borrow", "became Ready once its ServiceAccount may read the Secret", isReady)
}

// grant grants ServiceAccount sa of ns one more rule in ns.
func grant(t *testing.T, ns, sa string, rule rbacv1.PolicyRule) {
	t.Helper()
	name := fmt.Sprintf("%s-%s-%d", sa, rule.Resources[0], len(rule.ResourceNames))
	if _, err := kube.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{rule},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func cmDoc(name string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  k: v\n", name)
}

// askReconcile asks for a reconcile now, through the annotation, and
// returns the annotation's value, which status.lastHandledReconcileAt
// echoes once a reconcile has handled it.
func askReconcile(t *testing.T, ns, name string) string {
	t.Helper()
	at := time.Now().Format(time.RFC3339Nano)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v1alpha1.RequestedAtAnnotation: at,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vidra.InfrahubV1alpha1().VidraResources(ns).Patch(t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return at
}

// waitDeleted waits until the resource no longer exists.
func waitDeleted(t *testing.T, ns, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("VidraResource %s/%s was not deleted: %v", ns, name, err)
	}
}

// eventsOn returns the messages of the Events on a VidraResource with reason,
// or of all its Events when reason is empty.
func eventsOn(t *testing.T, ns, name, reason string) []string {
	t.Helper()
	list, err := kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "VidraResource", "involvedObject.name": name,
	}.String()})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if reason == "" || e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// waitEventOn waits for an Event with reason whose message contains fragment.
func waitEventOn(t *testing.T, ns, name, reason, fragment string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, m := range eventsOn(t, ns, name, reason) {
			if strings.Contains(m, fragment) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s Event on %s/%s saying %q; its Events: %q", reason, ns, name, fragment, eventsOn(t, ns, name, ""))
	}
}

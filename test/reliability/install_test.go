// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package reliability_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// installNamespace is the operator's namespace in manifests/, which the
// test replaces with one of its own.
const installNamespace = "vidra-system"

// The install's RBAC (manifests/rbac) is all the operator has in a cluster,
// where every other test runs it as an administrator. Running as the
// install's ServiceAccount, bound by the install's roles, it must do what a
// platform team installs it for: elect a leader, onboard a team from a
// resource of its own namespace (a ServiceAccount and a RoleBinding to the
// built-in edit role, which the API server lets an identity grant only if
// it holds every right of the role or may bind it), reconcile that team's
// resource as the team's ServiceAccount, record Events, repair drift, and
// clean up on deletion.
func TestTheInstallsRBACIsEnough(t *testing.T) {
	ns := namespace(t)
	startAsTheInstall(t, ns, "manifests")

	onboarding := fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata:
  name: deployer
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: deployer-edit
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: edit
subjects:
  - kind: ServiceAccount
    name: deployer
    namespace: %s
`, ns)
	createInstallVR(t, ns, "onboarding", onboarding, "")
	waitInstallReady(t, ns, "onboarding")

	// The team's resource acts as the ServiceAccount the platform made.
	createInstallVR(t, ns, "team", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: team-config\ndata:\n  greeting: hello\n", "deployer")
	waitInstallReady(t, ns, "team")

	deleteConfigMap(t, ns, "team-config")
	waitRestored(t, "the team's ConfigMap, deleted", time.Minute, configMapExists(ns, "team-config"))
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=team,reason=DriftCorrected"})
		return err == nil && len(events.Items) > 0, nil
	}); err != nil {
		t.Error("no DriftCorrected Event on the team's resource: the operator may not record Events")
	}

	// Deletion: each resource's objects go, with the identity it acts as,
	// and the operator removes the finalizers.
	deleteInstallVR(t, ns, "team")
	deleteInstallVR(t, ns, "onboarding")
	if _, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "team-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the team's ConfigMap outlived its resource (err %v)", err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Get(t.Context(), "deployer-edit", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the onboarding's RoleBinding outlived its resource (err %v)", err)
	}
}

// The restricted install (deploy/restricted) gives the operator's own
// identity no write at all: a resource of its own namespace that names no
// ServiceAccount is refused what it declares, and one that names a
// ServiceAccount applies, is repaired and cleans up as that ServiceAccount.
func TestTheRestrictedInstallWritesOnlyAsServiceAccounts(t *testing.T) {
	ns := namespace(t)
	startAsTheInstall(t, ns, "deploy/restricted")

	createInstallVR(t, ns, "as-operator", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: operator-config\n", "")
	vr := testenv.WaitVR(t, vidra, ns, "as-operator", "refused", func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == vr.Generation && c.Reason == v1alpha1.ReasonForbidden
	})
	if msg := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "operator-config") {
		t.Errorf("Ready message %q does not name the refused object", msg)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "operator-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a resource without a ServiceAccount wrote with the restricted operator's identity (err %v)", err)
	}

	// The platform gives the team its ServiceAccount, not Vidra.
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "deployer-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "deployer", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createInstallVR(t, ns, "team", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: team-config\ndata:\n  greeting: hello\n", "deployer")
	waitInstallReady(t, ns, "team")
	deleteConfigMap(t, ns, "team-config")
	waitRestored(t, "the team's ConfigMap, deleted", time.Minute, configMapExists(ns, "team-config"))
	deleteInstallVR(t, ns, "team")
	if _, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "team-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the team's ConfigMap outlived its resource (err %v)", err)
	}
}

// startAsTheInstall creates the RBAC objects of the kustomization in dir
// (manifests, or an overlay of it) for an operator of namespace ns, and
// runs the operator as the install's ServiceAccount, with leader election
// as the install runs it and further flags args, until the test ends.
func startAsTheInstall(t *testing.T, ns, dir string, args ...string) *testenv.VidraProcess {
	t.Helper()
	installRBAC(t, ns, dir)
	tmp := t.TempDir()
	kc := filepath.Join(tmp, "kubeconfig")
	// What the API server makes of the ServiceAccount's token: its user
	// name, and the groups of every ServiceAccount.
	if err := env.WriteUserKubeconfig(kc, "system:serviceaccount:"+ns+":vidra",
		"system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated"); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(tmp, "vidra.log")
	p, err := testenv.StartVidra(testenv.VidraOptions{
		Binary: vidraBinary, Kubeconfig: kc, Namespace: ns, LogPath: logPath,
		Args: append([]string{"--watch-namespace=" + ns, "--leader-elect", "--log-format=json"}, args...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("log of vidra (tail):\n%s", tail(string(data), 40))
		}
	})
	if err := p.WaitReady(t.Context(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return p
}

// deleteInstallVR deletes a resource and waits until its cleanup let it go.
func deleteInstallVR(t *testing.T, ns, name string) {
	t.Helper()
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("VidraResource %s/%s was not deleted: its cleanup did not finish", ns, name)
	}
}

// installRBAC creates the RBAC objects of the kustomization in dir, as
// kubectl kustomize renders it, for an operator of namespace ns: the
// namespaced ones in ns, the cluster-scoped ones under names of their own,
// removed when the test ends.
func installRBAC(t *testing.T, ns, dir string) {
	t.Helper()
	gvrs := map[string]schema.GroupVersionResource{
		"ServiceAccount":     {Version: "v1", Resource: "serviceaccounts"},
		"ClusterRole":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		"ClusterRoleBinding": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
		"Role":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		"RoleBinding":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	kinds := map[string]bool{}
	for _, u := range renderInstall(t, dir) {
		gvr, ok := gvrs[u.GetKind()]
		if !ok {
			continue // the CRD, the Deployment and the rest: not RBAC
		}
		rewriteForNamespace(t, u, ns)
		client := dynamic.ResourceInterface(dyn.Resource(gvr))
		if u.GetNamespace() != "" {
			client = dyn.Resource(gvr).Namespace(u.GetNamespace())
		} else {
			t.Cleanup(func() { _ = dyn.Resource(gvr).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
		}
		if _, err := client.Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s of %s: %v", u.GetKind(), u.GetName(), dir, err)
		}
		kinds[u.GetKind()] = true
	}
	if len(kinds) != len(gvrs) {
		t.Fatalf("%s rendered RBAC objects of %d kinds, want one or more of each of %d kinds", dir, len(kinds), len(gvrs))
	}
}

// renderInstall returns the objects of the kustomization in dir, as kubectl
// kustomize renders it.
func renderInstall(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), env.Kubectl(), "kustomize", filepath.Join(root, dir)).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	var objects []*unstructured.Unstructured
	for _, doc := range strings.Split(string(out), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		objects = append(objects, u)
	}
	return objects
}

// rewriteForNamespace moves an object of the install to namespace ns: its
// own namespace, the namespaces of its subjects, and for a cluster-scoped
// object and the cluster roles it refers to, a name of ns's.
func rewriteForNamespace(t *testing.T, u *unstructured.Unstructured, ns string) {
	t.Helper()
	if u.GetNamespace() == installNamespace {
		u.SetNamespace(ns)
	}
	if u.GetKind() == "ClusterRole" || u.GetKind() == "ClusterRoleBinding" {
		u.SetName(u.GetName() + "-" + ns)
	}
	if kind, _, _ := unstructured.NestedString(u.Object, "roleRef", "kind"); kind == "ClusterRole" {
		name, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
		if strings.HasPrefix(name, "vidra-") {
			_ = unstructured.SetNestedField(u.Object, name+"-"+ns, "roleRef", "name")
		}
	}
	subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
	for _, s := range subjects {
		if m, ok := s.(map[string]any); ok && m["namespace"] == installNamespace {
			m["namespace"] = ns
		}
	}
	if subjects != nil {
		if err := unstructured.SetNestedSlice(u.Object, subjects, "subjects"); err != nil {
			t.Fatal(err)
		}
	}
}

func createInstallVR(t *testing.T, ns, name, manifest, serviceAccount string) {
	t.Helper()
	testenv.CreateVR(t, vidra, ns, name, manifest, func(vr *v1alpha1.VidraResource) {
		vr.Spec.ServiceAccountName = serviceAccount
	})
}

// waitInstallReady waits until the resource is Ready for its generation,
// and fails with its Ready condition, which names what was refused.
func waitInstallReady(t *testing.T, ns, name string) {
	t.Helper()
	testenv.WaitVR(t, vidra, ns, name, "became Ready", func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == vr.Generation
	})
}

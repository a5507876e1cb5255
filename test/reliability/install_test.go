package reliability_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	installRBAC(t, ns)
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	// What the API server makes of the ServiceAccount's token: its user
	// name, and the groups of every ServiceAccount.
	if err := env.WriteUserKubeconfig(kc, "system:serviceaccount:"+ns+":vidra",
		"system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated"); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "vidra.log")
	p, err := testenv.StartVidra(testenv.VidraOptions{
		Binary: vidraBinary, Kubeconfig: kc, Namespace: ns, LogPath: logPath,
		Args: []string{"--watch-namespace=" + ns, "--leader-elect", "--log-format=json"},
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
	for _, name := range []string{"team", "onboarding"} {
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
	if _, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "team-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the team's ConfigMap outlived its resource (err %v)", err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Get(t.Context(), "deployer-edit", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the onboarding's RoleBinding outlived its resource (err %v)", err)
	}
}

// installRBAC creates the objects of manifests/rbac for an operator of
// namespace ns: the namespaced ones in ns, the cluster-scoped ones under
// names of their own, removed when the test ends.
func installRBAC(t *testing.T, ns string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "manifests", "rbac", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no RBAC manifests found: %v", err)
	}
	gvrs := map[string]schema.GroupVersionResource{
		"ServiceAccount":     {Version: "v1", Resource: "serviceaccounts"},
		"ClusterRole":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		"ClusterRoleBinding": {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
		"Role":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		"RoleBinding":        {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		gvr, ok := gvrs[u.GetKind()]
		if !ok {
			t.Fatalf("%s: kind %s is new to this test: add it", file, u.GetKind())
		}
		rewriteForNamespace(t, u, ns)
		client := dynamic.ResourceInterface(dyn.Resource(gvr))
		if u.GetNamespace() != "" {
			client = dyn.Resource(gvr).Namespace(u.GetNamespace())
		} else {
			t.Cleanup(func() { _ = dyn.Resource(gvr).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
		}
		if _, err := client.Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s from %s: %v", u.GetKind(), u.GetName(), file, err)
		}
	}
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

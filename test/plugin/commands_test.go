// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func configMap(name, value string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  value: \"" + value + "\"\n"
}

func docs(parts ...string) string { return strings.Join(parts, "---\n") }

// ready creates resource ns/name holding manifest and waits until it is
// Ready with every object healthy.
func ready(t *testing.T, ns, name, manifest string, mutate ...func(*v1alpha1.VidraResource)) *v1alpha1.VidraResource {
	t.Helper()
	testenv.CreateVR(t, vidra, ns, name, manifest, mutate...)
	return testenv.WaitVR(t, vidra, ns, name, "became Ready and healthy", healthy)
}

func TestGetListsResourcesWithHealthAndDrift(t *testing.T) {
	ns := namespace(t)
	ready(t, ns, "web", docs(configMap("a", "1"), configMap("b", "1")))
	n := normal{names: map[string]string{ns: "<ns>"}, ages: true}

	golden(t, "get.txt", run(t, "get", "-n", ns).expect(t, 0).stdout, n)
	golden(t, "get-wide.txt", run(t, "get", "web", "-n", ns, "-o", "wide").expect(t, 0).stdout, normal{names: n.names, collapse: true})
	golden(t, "get-name.txt", run(t, "get", "-n", ns, "-o", "name").expect(t, 0).stdout, n)

	empty := namespace(t)
	res := run(t, "get", "-n", empty).expect(t, 0)
	golden(t, "get-empty.txt", res.stderr, normal{names: map[string]string{empty: "<ns>"}})

	res = run(t, "get", "missing", "-n", ns).expect(t, 1)
	golden(t, "get-missing.txt", res.stderr, normal{names: map[string]string{ns: "<ns>"}})
}

// get lists in pages: every resource shows whatever the page size, so the
// continue token is followed.
func TestGetListsEveryPage(t *testing.T) {
	ns := namespace(t)
	for _, name := range []string{"a", "b", "c"} {
		testenv.CreateVR(t, vidra, ns, name, configMap(name, "1"))
	}
	want := "vidraresource.infrahub.operators.com/a\nvidraresource.infrahub.operators.com/b\nvidraresource.infrahub.operators.com/c\n"
	for _, chunk := range []string{"1", "2", "0"} {
		if got := run(t, "get", "-n", ns, "-o", "name", "--chunk-size", chunk).expect(t, 0).stdout; got != want {
			t.Errorf("--chunk-size %s printed %q, want %q", chunk, got, want)
		}
	}
	out := run(t, "get", "-n", ns, "-o", "json", "--chunk-size", "2").expect(t, 0).stdout
	if n := strings.Count(out, `"kind": "VidraResource"`); n != 3 {
		t.Errorf("-o json in pages of 2 holds %d resources, want 3:\n%s", n, out)
	}
	table := run(t, "get", "-n", ns, "--chunk-size", "1").expect(t, 0).stdout
	for _, name := range []string{"a", "b", "c"} {
		if !strings.Contains(table, "\n"+name+" ") {
			t.Errorf("the table in pages of 1 lacks %s:\n%s", name, table)
		}
	}
}

func TestTreeShowsObjectsHealthAndTheLastDriftCorrection(t *testing.T) {
	ns := namespace(t)
	ready(t, ns, "web", docs(configMap("a", "1"), configMap("b", "1")))

	// The drift history as the operator records a correction: who changed
	// what, and when.
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		vr, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		vr.Status.DriftHistory = []v1alpha1.DriftRecord{{
			APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "b",
			Fields: []string{"/data/value"}, Manager: "kubectl-edit", Time: metav1.NewTime(time.Now().Add(-2 * time.Minute)),
		}}
		_, err = vidra.InfrahubV1alpha1().VidraResources(ns).UpdateStatus(ctx, vr, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("write status.driftHistory: %v", err)
	}
	testenv.WaitVR(t, vidra, ns, "web", "kept the drift history", func(vr *v1alpha1.VidraResource) bool {
		return len(vr.Status.DriftHistory) == 1 && healthy(vr)
	})

	n := normal{names: map[string]string{ns: "<ns>"}, collapse: true}
	golden(t, "tree.txt", run(t, "tree", "web", "-n", ns).expect(t, 0).stdout, n)
	golden(t, "tree.json", run(t, "tree", "web", "-n", ns, "-o", "json").expect(t, 0).stdout, normal{names: n.names})
}

// diffManifest is the resource of the diff tests: a stays, b changes, c
// leaves the manifest and d joins it.
var diffManifest = docs(configMap("a", "1"), configMap("b", "1"), configMap("c", "1"))

func TestDiffShowsCreatedChangedAndPrunedObjects(t *testing.T) {
	ns := namespace(t)
	ready(t, ns, "web", diffManifest)
	n := normal{names: map[string]string{ns: "<ns>"}}

	golden(t, "diff-none.txt", run(t, "diff", "web", "-n", ns).expect(t, 0).stdout, n)

	file := filepath.Join(t.TempDir(), "new.yaml")
	if err := os.WriteFile(file, []byte(docs(configMap("a", "1"), configMap("b", "2"), configMap("d", "1"))), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, "diff", "web", "-n", ns, "-f", file).expect(t, 1)
	golden(t, "diff-changes.txt", res.stdout, n)
	golden(t, "diff-changes.yaml", run(t, "diff", "web", "-n", ns, "-f", file, "-o", "yaml").expect(t, 1).stdout, n)

	// A dry run changes nothing.
	if _, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "d", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap d exists after a diff: %v", err)
	}
	if cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "b", metav1.GetOptions{}); err != nil || cm.Data["value"] != "1" {
		t.Errorf("ConfigMap b changed by a diff: %v, %v", cm.Data, err)
	}
}

func TestDiffShowsDriftOfTheLiveManifest(t *testing.T) {
	ns := namespace(t)
	ready(t, ns, "web", diffManifest)
	// Suspended, Vidra leaves the drift in place for diff to see.
	run(t, "suspend", "web", "-n", ns).expect(t, 0)
	testenv.WaitVR(t, vidra, ns, "web", "became Stale", func(vr *v1alpha1.VidraResource) bool {
		return vr.Status.DeployState == v1alpha1.DeployStateStale
	})
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "diff-drift.txt", run(t, "diff", "web", "-n", ns).expect(t, 1).stdout, normal{names: map[string]string{ns: "<ns>"}})
}

func TestDiffOfANewDefinitionCreatesEverything(t *testing.T) {
	ns := namespace(t)
	file := filepath.Join(t.TempDir(), "vr.yaml")
	def := "apiVersion: infrahub.operators.com/v1alpha1\nkind: VidraResource\nmetadata:\n  name: fresh\nspec:\n  manifest: |\n" +
		indent(docs(configMap("a", "1")), "    ")
	if err := os.WriteFile(file, []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, "diff", "-n", ns, "-f", file).expect(t, 1)
	golden(t, "diff-new.txt", strings.ReplaceAll(res.stdout, file, "vr.yaml"), normal{names: map[string]string{ns: "<ns>"}})
}

func TestDiffOfAFieldTheSchemaLacksSaysWhatToFix(t *testing.T) {
	ns := namespace(t)
	file := filepath.Join(t.TempDir(), "vr.yaml")
	typo := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: typo\ndat:\n  a: b\n"
	def := "apiVersion: infrahub.operators.com/v1alpha1\nkind: VidraResource\nmetadata:\n  name: fresh\nspec:\n  manifest: |\n" +
		indent(docs(configMap("a", "1"), typo), "    ")
	if err := os.WriteFile(file, []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, "diff", "-n", ns, "-f", file).expect(t, 2)
	want := "the API server refuses the apply of ConfigMap " + ns + "/typo: v1 ConfigMap has no field .dat: check its spelling and indentation"
	if !strings.Contains(res.stdout+res.stderr, want) {
		t.Errorf("the diff does not say what to fix; want %q in\n%s%s", want, res.stdout, res.stderr)
	}
}

func TestDiffOfAnOldAPIVersionSaysTheServedOne(t *testing.T) {
	ns := namespace(t)
	file := filepath.Join(t.TempDir(), "vr.yaml")
	def := "apiVersion: infrahub.operators.com/v1alpha1\nkind: VidraResource\nmetadata:\n  name: old\nspec:\n  manifest: |\n" +
		indent("apiVersion: apps/v1beta1\nkind: Deployment\nmetadata:\n  name: web\n", "    ")
	if err := os.WriteFile(file, []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, "diff", "-n", ns, "-f", file).expect(t, 2)
	want := `the destination does not serve kind "Deployment" of apiVersion "apps/v1beta1": it serves Deployment as apiVersion "apps/v1"`
	if !strings.Contains(res.stderr, want) {
		t.Errorf("the diff does not name the served apiVersion; want %q in\n%s", want, res.stderr)
	}
}

func TestDiffOfAManifestThatDoesNotParseSaysWhere(t *testing.T) {
	ns := namespace(t)
	ready(t, ns, "web", diffManifest)
	file := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(file, []byte(configMap("a", "1")+"---\nkind: ConfigMap\nmetadata:\n  name: b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, "diff", "web", "-n", ns, "-f", file).expect(t, 2)
	if res.stdout != "" {
		t.Errorf("a failed diff printed a diff:\n%s", res.stdout)
	}
	golden(t, "diff-unparsable.txt", strings.ReplaceAll(res.stderr, file, "broken.yaml"), normal{names: map[string]string{ns: "<ns>"}})
}

func TestDiffRefusesARemoteDestination(t *testing.T) {
	ns := namespace(t)
	file := filepath.Join(t.TempDir(), "vr.yaml")
	def := "apiVersion: infrahub.operators.com/v1alpha1\nkind: VidraResource\nmetadata:\n  name: far\nspec:\n  destination:\n    server: https://far.example.com:6443\n  manifest: |\n" +
		indent(configMap("a", "1"), "    ")
	if err := os.WriteFile(file, []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, "diff", "-n", ns, "-f", file).expect(t, 2)
	golden(t, "diff-remote.txt", res.stderr, normal{names: map[string]string{ns: "<ns>"}})
}

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}

func TestSuspendAndResume(t *testing.T) {
	ns := namespace(t)
	ready(t, ns, "web", configMap("a", "1"))

	res := run(t, "suspend", "web", "-n", ns).expect(t, 0)
	golden(t, "suspend.txt", res.stdout, normal{})
	testenv.WaitVR(t, vidra, ns, "web", "became Stale", func(vr *v1alpha1.VidraResource) bool {
		return vr.Spec.Suspend && vr.Status.DeployState == v1alpha1.DeployStateStale
	})
	golden(t, "suspend-again.txt", run(t, "suspend", "web", "-n", ns).expect(t, 0).stdout, normal{})
	golden(t, "reconcile-suspended.txt", run(t, "reconcile", "web", "-n", ns).expect(t, 1).stderr, normal{names: map[string]string{ns: "<ns>"}})

	golden(t, "resume.txt", run(t, "resume", "web", "-n", ns).expect(t, 0).stdout, normal{})
	vr := testenv.WaitVR(t, vidra, ns, "web", "became Ready again", func(vr *v1alpha1.VidraResource) bool {
		return !vr.Spec.Suspend && isReady(vr)
	})
	// The field is kubectl vidra's, applied: not a hand edit of kubectl.
	owned := false
	for _, e := range vr.ManagedFields {
		owned = owned || (e.Manager == "kubectl-vidra" && e.Operation == metav1.ManagedFieldsOperationApply)
	}
	if !owned {
		t.Errorf("spec.suspend is not applied by field manager kubectl-vidra: %+v", vr.ManagedFields)
	}
}

func TestReconcileWaitsUntilTheOperatorHandledTheRequest(t *testing.T) {
	ns := namespace(t)
	ready(t, ns, "web", docs(configMap("a", "1"), configMap("b", "1")))

	res := run(t, "reconcile", "web", "-n", ns).expect(t, 0)
	golden(t, "reconcile.txt", res.stdout, normal{})
	vr, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	requested := vr.Annotations[v1alpha1.RequestedAtAnnotation]
	if _, err := time.Parse(time.RFC3339Nano, requested); err != nil {
		t.Errorf("requested-at %q is not an RFC 3339 time: %v", requested, err)
	}
	if vr.Status.LastHandledReconcileAt != requested {
		t.Errorf("the command returned before the operator echoed %q (status has %q)", requested, vr.Status.LastHandledReconcileAt)
	}
	if !strings.Contains(res.stderr, requested) {
		t.Errorf("stderr does not name the request %q:\n%s", requested, res.stderr)
	}

	res = run(t, "reconcile", "web", "-n", ns, "--wait=false").expect(t, 0)
	if !strings.Contains(res.stdout, "reconcile requested at") {
		t.Errorf("reconcile --wait=false printed %q", res.stdout)
	}
}

// userKubeconfig writes a kubeconfig of user, who may do verbs on the
// VidraResources of namespace ns and nothing else, and returns its path.
func userKubeconfig(t *testing.T, ns, user string, verbs ...string) string {
	t.Helper()
	if _, err := kube.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{v1alpha1.ResourcePlural}, Verbs: verbs}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteUserKubeconfig(path, user); err != nil {
		t.Fatal(err)
	}
	return path
}

// A person who may request a reconcile (get and patch) but not watch the
// resource hears the API server's refusal at once, not, after the whole
// timeout, that the operator may not be running.
func TestReconcileWithoutTheRightToWatchSaysSo(t *testing.T) {
	ns := namespace(t)
	ready(t, ns, "web", configMap("a", "1"))
	path := userKubeconfig(t, ns, "patcher", "get", "patch")
	// The timeout outlasts runWith's own bound: only the refusal ends the
	// command in time.
	res := runWith(t, path, "", "reconcile", "web", "-n", ns, "--timeout", "10m").expect(t, 1)
	if !strings.Contains(res.stderr, `User "patcher" cannot watch resource "vidraresources"`) && !strings.Contains(res.stderr, `User "patcher" cannot list resource "vidraresources"`) {
		t.Errorf("stderr does not give the refusal:\n%s", res.stderr)
	}
	if strings.Contains(res.stderr, "did not handle the request") {
		t.Errorf("stderr blames the operator:\n%s", res.stderr)
	}
}

func TestWhyExplainsAResourceWithABadObject(t *testing.T) {
	ns := namespace(t)
	manifest := docs(configMap("a", "1"),
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lost\n  namespace: "+ns+"-missing\ndata:\n  value: \"1\"\n")
	testenv.CreateVR(t, vidra, ns, "web", manifest)
	testenv.WaitVR(t, vidra, ns, "web", "reported the missing namespace", testenv.HasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonNamespaceNotFound))
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,type=Warning"})
		return err == nil && len(evs.Items) > 0, nil
	})
	if err != nil {
		t.Fatalf("no Warning Event of the resource: %v", err)
	}
	n := normal{names: map[string]string{ns: "<ns>"}, collapse: true}
	golden(t, "why.txt", run(t, "why", "web", "-n", ns).expect(t, 0).stdout, normal{names: n.names, ages: true})
	golden(t, "reconcile-failing.txt", run(t, "reconcile", "web", "-n", ns).expect(t, 1).stdout, n)
}

func TestCreatePacksFilesIntoAResource(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("10-config.yaml", "# the configuration\n"+configMap("config", "1"))
	write("20-more.yml", docs(configMap("more", "1"), configMap("most", "1")))
	write("30-list.json", `{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "web"}}]}`)
	write("README.md", "not part of the manifest")

	res := runWith(t, kubeconfig, "", "create", "web", "-n", "team-a", "-f", dir, "--destination-namespace", "demo", "--dry-run=client", "-o", "yaml").expect(t, 0)
	golden(t, "create-dry-run.yaml", res.stdout, normal{names: map[string]string{dir: "<dir>"}})

	// Created for real, the operator applies it.
	ns := namespace(t)
	res = run(t, "create", "web", "-n", ns, "-f", dir).expect(t, 0)
	golden(t, "create.txt", res.stdout, normal{})
	testenv.WaitVR(t, vidra, ns, "web", "became Ready", isReady)

	write("20-more.yml", docs(configMap("more", "1"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels: [x]\n"))
	res = run(t, "create", "broken", "-n", ns, "-f", dir).expect(t, 1)
	golden(t, "create-unparsable.txt", strings.ReplaceAll(res.stderr, dir+"/", ""), normal{})
}

func TestClusterAddRefusesAnExecPluginContext(t *testing.T) {
	ns := namespace(t)
	data, err := env.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	kc.AuthInfos["cloud"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: "cloud-login", Args: []string{"token"}, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	kc.Contexts["cloud"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "cloud"}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	res := runWith(t, path, "", "cluster", "add", "cloud", "--context", "cloud", "-n", ns).expect(t, 1)
	golden(t, "cluster-add-exec.txt", res.stderr, normal{})
	if _, err := kube.CoreV1().Secrets(ns).Get(t.Context(), "cloud", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused context left a Secret: %v", err)
	}
}

func TestVersionAndCompletion(t *testing.T) {
	res := run(t, "version").expect(t, 0)
	if !strings.Contains(res.stdout, "Server Version: "+testenv.KubernetesVersion) {
		t.Errorf("version does not name the server's version:\n%s", res.stdout)
	}
	res = run(t, "completion", "bash").expect(t, 0)
	if !strings.Contains(res.stdout, "__start_kubectl-vidra") {
		t.Errorf("completion bash is not a bash completion script:\n%.300s", res.stdout)
	}

	ns := namespace(t)
	ready(t, ns, "web", configMap("a", "1"))
	ready(t, ns, "worker", configMap("b", "1"))
	res = run(t, "__complete", "tree", "-n", ns, "").expect(t, 0)
	golden(t, "complete-names.txt", res.stdout, normal{})
}

// Every command's help shows an example.
func TestEveryCommandHasAnExample(t *testing.T) {
	for _, cmd := range [][]string{
		{"get"}, {"tree"}, {"diff"}, {"reconcile"}, {"suspend"}, {"resume"}, {"why"},
		{"cluster"}, {"cluster", "add"}, {"create"}, {"version"}, {"completion"}, {"wakeups"},
	} {
		res := run(t, append(cmd, "--help")...).expect(t, 0)
		if !strings.Contains(res.stdout, "Examples:") {
			t.Errorf("kubectl vidra %s --help shows no example", strings.Join(cmd, " "))
		}
	}
}

func TestDiffActsAsTheResourcesServiceAccount(t *testing.T) {
	ns := namespace(t)
	if _, err := testenv.CreateConfigMapTenant(t.Context(), kube, ns, "deployer"); err != nil {
		t.Fatal(err)
	}
	ready(t, ns, "web", configMap("a", "1"), func(vr *v1alpha1.VidraResource) { vr.Spec.ServiceAccountName = "deployer" })
	n := normal{names: map[string]string{ns: "<ns>"}}

	// The ServiceAccount may write ConfigMaps only: the dry run, run as it,
	// is refused the Secret, as the operator's apply would be.
	file := filepath.Join(t.TempDir(), "new.yaml")
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: token\nstringData:\n  token: x\n"
	if err := os.WriteFile(file, []byte(docs(configMap("a", "2"), secret)), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, "diff", "web", "-n", ns, "-f", file).expect(t, 2)
	golden(t, "diff-serviceaccount.txt", res.stdout+"---- stderr\n"+res.stderr, n)

	// A person who may read the resource but not impersonate its
	// ServiceAccount hears so, before any dry run.
	path := userKubeconfig(t, ns, "reader", "get", "list")
	res = runWith(t, path, "", "diff", "web", "-n", ns).expect(t, 2)
	golden(t, "diff-no-impersonation.txt", res.stderr, n)
}

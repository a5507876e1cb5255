// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// deceiving holds one rune of each kind a tenant may use to drive a
// terminal or deceive its reader: C0 (ESC, BEL, CR), DEL, C1 (CSI), the
// bidirectional overrides and isolates, the zero-width characters, a tag
// character, and the line and paragraph separators.
const deceiving = "a\x1b]0;x\a\r\x7f\u009b\u202e\u2066\u200e\u200b\u200d\ufeff\u2060\U000e0001\u2028\u2029b"

// checkPrintsNoneOf fails t if out holds a control (but '\n' and '\t'),
// a format character or a separator.
func checkPrintsNoneOf(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if (unicode.IsControl(r) && r != '\n' && r != '\t') || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			t.Errorf("%s prints %U:\n%q", what, r, out)
			return
		}
	}
}

// applicable is deceiving without the runes a YAML reader refuses (C0
// but CR, DEL, C1 but NEL), which the API server's apply refuses too: a
// manifest's value the diff shows.
const applicable = "a\r\u202e\u2066\u200e\u200b\u200d\ufeff\u2060\U000e0001\u2028\u2029b"

// TestEveryFormatEscapesWhatATenantWrote: a tenant's annotation, a
// message and a field manager's name in its status, and a ConfigMap value
// of a manifest reach get, tree, why and diff in every format as
// escapes, and -o json and -o yaml read back as what was written.
func TestEveryFormatEscapesWhatATenantWrote(t *testing.T) {
	ns := namespace(t)
	// Suspended, the operator leaves the status written below as it is.
	testenv.CreateVR(t, vidra, ns, "web", configMap("a", "1"), func(vr *v1alpha1.VidraResource) {
		vr.Annotations = map[string]string{"note": deceiving}
		vr.Spec.Suspend = true
	})
	testenv.WaitVR(t, vidra, ns, "web", "was suspended", func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonSuspended && vr.Status.ObservedGeneration == vr.Generation
	})
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		vr, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		vr.Status.ManagedResources = []v1alpha1.ManagedResource{{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "a", Health: "Failed", HealthMessage: deceiving}}
		vr.Status.DriftHistory = []v1alpha1.DriftRecord{{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "a",
			Fields: []string{"/data/value"}, Manager: "m" + deceiving, Time: metav1.NewTime(time.Now().Add(-time.Minute))}}
		meta.SetStatusCondition(&vr.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionConflict, Status: metav1.ConditionTrue,
			Reason: "FieldConflict", Message: "ConfigMap " + ns + "/a: " + deceiving, ObservedGeneration: vr.Generation})
		_, err = vidra.InfrahubV1alpha1().VidraResources(ns).UpdateStatus(ctx, vr, metav1.UpdateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("write the status: %v", err)
	}
	testenv.WaitVR(t, vidra, ns, "web", "kept the status written", func(vr *v1alpha1.VidraResource) bool {
		return len(vr.Status.DriftHistory) == 1 && meta.IsStatusConditionTrue(vr.Status.Conditions, v1alpha1.ConditionConflict)
	})

	file := filepath.Join(t.TempDir(), "new.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  value: "+strconv.QuoteToASCII(applicable)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		// back reads the output back, for -o json and yaml.
		back func(t *testing.T, out string)
	}{
		{args: []string{"get"}},
		{args: []string{"get", "-o", "wide"}},
		{args: []string{"get", "-o", "name"}},
		{args: []string{"get", "web", "-o", "json"}, back: readsBackAnnotation(json.Unmarshal)},
		{args: []string{"get", "web", "-o", "yaml"}, back: readsBackAnnotation(yamlUnmarshal)},
		{args: []string{"tree", "web"}},
		{args: []string{"tree", "web", "-o", "json"}, back: readsBackManager(json.Unmarshal)},
		{args: []string{"tree", "web", "-o", "yaml"}, back: readsBackManager(yamlUnmarshal)},
		{args: []string{"why", "web"}},
		{args: []string{"diff", "web", "-f", file}, code: 1},
		{args: []string{"diff", "web", "-f", file, "-o", "json"}, code: 1},
		{args: []string{"diff", "web", "-f", file, "-o", "yaml"}, code: 1},
	} {
		res := run(t, append(c.args, "-n", ns)...).expect(t, c.code)
		what := strings.Join(c.args, " ")
		checkPrintsNoneOf(t, what, res.stdout)
		if strings.HasPrefix(what, "diff") && !strings.Contains(res.stdout, `\u202e`) {
			t.Errorf("%s does not show the value written:\n%s", what, res.stdout)
		}
		if c.back != nil {
			c.back(t, res.stdout)
		}
	}
}

func yamlUnmarshal(b []byte, v any) error { return yaml.Unmarshal(b, v) }

func readsBackAnnotation(unmarshal func([]byte, any) error) func(*testing.T, string) {
	return func(t *testing.T, out string) {
		t.Helper()
		var vr v1alpha1.VidraResource
		if err := unmarshal([]byte(out), &vr); err != nil || vr.Annotations["note"] != deceiving {
			t.Errorf("the output reads back as %q (%v), want the annotation written:\n%s", vr.Annotations["note"], err, out)
		}
	}
}

func readsBackManager(unmarshal func([]byte, any) error) func(*testing.T, string) {
	return func(t *testing.T, out string) {
		t.Helper()
		var tree struct {
			Objects []struct {
				Drift *v1alpha1.DriftRecord `json:"drift"`
			} `json:"objects"`
		}
		if err := unmarshal([]byte(out), &tree); err != nil || len(tree.Objects) != 1 || tree.Objects[0].Drift == nil || tree.Objects[0].Drift.Manager != "m"+deceiving {
			t.Errorf("the output does not read back as the manager written (%v):\n%s", err, out)
		}
	}
}

// deployerKubeconfig writes a kubeconfig whose current context, testenv,
// is the suite's administrator, and whose context deployer is
// ServiceAccount deployer of ns, which may only write ConfigMaps of ns.
// With caFile, deployer's cluster names its CA as a file.
func deployerKubeconfig(t *testing.T, ns string, caFile bool) string {
	t.Helper()
	ctx := t.Context()
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "deployer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "deployer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "deployer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "deployer", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	token, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "deployer", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := env.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	deployer := kc.Clusters["testenv"].DeepCopy()
	if caFile {
		deployer.CertificateAuthority = filepath.Join(dir, "ca.crt")
		if err := os.WriteFile(deployer.CertificateAuthority, deployer.CertificateAuthorityData, 0o600); err != nil {
			t.Fatal(err)
		}
		deployer.CertificateAuthorityData = nil
	}
	kc.Clusters["deployer"] = deployer
	kc.AuthInfos["deployer"] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	kc.Contexts["deployer"] = &clientcmdapi.Context{Cluster: "deployer", AuthInfo: "deployer"}
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkSecret fails t unless Secret ns/name holds a kubeconfig the
// operator accepts.
func checkSecret(t *testing.T, ns, name string) {
	t.Helper()
	secret, err := kube.CoreV1().Secrets(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := destination.CheckKubeconfig(secret.Data["kubeconfig"]); err != nil {
		t.Errorf("the operator would refuse the Secret's kubeconfig: %v", err)
	}
}

// checkNoSecret fails t if Secret ns/name exists.
func checkNoSecret(t *testing.T, ns, name string) {
	t.Helper()
	if _, err := kube.CoreV1().Secrets(ns).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused context left Secret %s: %v", name, err)
	}
}

func TestClusterAddWritesTheSecretTheOperatorAccepts(t *testing.T) {
	ns := namespace(t)
	path := deployerKubeconfig(t, ns, false)
	res := runWith(t, path, "", "cluster", "add", "staging", "--context", "deployer", "-n", ns).expect(t, 0)
	golden(t, "cluster-add.txt", res.stdout, normal{names: map[string]string{ns: "<ns>"}})
	if res.stderr != "" {
		t.Errorf("a scoped ServiceAccount's identity is warned about:\n%s", res.stderr)
	}
	checkSecret(t, ns, "staging")
}

// The suite's administrator (system:masters) is refused, with the risks
// named and the way out; --yes writes it with a warning.
func TestClusterAddRefusesAnAdministratorWithoutYes(t *testing.T) {
	ns := namespace(t)
	res := run(t, "cluster", "add", "admin", "--context", "testenv", "-n", ns).expect(t, 1)
	for _, want := range []string{"is in group system:masters", "may do anything in every namespace", "escalate clusterroles",
		"bind clusterroles", "impersonate users", "namespace " + ns, "create token", "--yes"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, res.stderr)
		}
	}
	checkNoSecret(t, ns, "admin")

	res = run(t, "cluster", "add", "admin", "--context", "testenv", "-n", ns, "--yes").expect(t, 0)
	if !strings.Contains(res.stderr, "Warning: ") || !strings.Contains(res.stderr, "system:masters") {
		t.Errorf("--yes wrote an administrator's identity without a warning:\n%s", res.stderr)
	}
	checkSecret(t, ns, "admin")
}

// A context whose CA is a file is refused unless --embed-files asks to
// inline it, and then the command says which file it inlined.
func TestClusterAddRefusesFilesItWasNotAskedToInline(t *testing.T) {
	ns := namespace(t)
	path := deployerKubeconfig(t, ns, true)
	res := runWith(t, path, "", "cluster", "add", "files", "--context", "deployer", "-n", ns).expect(t, 1)
	if !strings.Contains(res.stderr, `certificate-authority of cluster "deployer"`) || !strings.Contains(res.stderr, "--embed-files") {
		t.Errorf("the refusal does not name the field and the flag:\n%s", res.stderr)
	}
	checkNoSecret(t, ns, "files")

	res = runWith(t, path, "", "cluster", "add", "files", "--context", "deployer", "-n", ns, "--embed-files").expect(t, 0)
	if !strings.Contains(res.stderr, `Inlined certificate-authority of cluster "deployer"`) {
		t.Errorf("the command does not say which file it inlined:\n%s", res.stderr)
	}
	checkSecret(t, ns, "files")
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// hostile is what a tenant's API server may answer, or a tenant write: an
// OSC that sets the terminal's title, an erase of the screen, a carriage
// return, a C1 CSI and a right-to-left override.
const hostile = "a\x1b]0;x\a\x1b[2J\rb\u009b31m\u202egnp.exe"

// checkTerminal fails t if out holds a control character other than '\n'
// and '\t', or a bidirectional override.
func checkTerminal(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if (unicode.IsControl(r) && r != '\n' && r != '\t') || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			t.Errorf("%s prints %U:\n%q", what, r, out)
			return
		}
	}
}

// TestReconcileOutcomeKeepsHostileTextOffTheTerminal: the outcome reconcile
// prints holds the Ready condition, the objects and the errors as a
// tenant's API server wrote them, without their control characters.
func TestReconcileOutcomeKeepsHostileTextOffTheTerminal(t *testing.T) {
	word := strings.ReplaceAll(hostile, "\r", "")
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "web" + hostile, Namespace: "team-a" + hostile, Generation: 1}}
	vr.Status.ObservedGeneration = 1
	vr.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: "False" + hostile, Reason: "ApplyFailed" + hostile, ObservedGeneration: 1,
		Message: "Role team-a/r" + word + " (document 1): " + hostile + "; " + hostile}}
	vr.Status.ManagedResources = []v1alpha1.ManagedResource{
		{APIVersion: "example.com/v1", Kind: "Widget" + hostile, Namespace: "team-a", Name: "w" + hostile, Health: "Failed", HealthMessage: hostile},
	}
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	if err := writeOutcome(&root{streams: streams}, vr); err != nil {
		t.Fatal(err)
	}
	checkTerminal(t, "reconcile", out.String())
	for _, want := range []string{"Objects failing or not healthy:\n  Role team-a/r", "\n  Widget", "Errors:\n  a\\x1b]0;x"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the outcome lacks %q:\n%s", want, out.String())
		}
	}
}

// TestErrorsKeepHostileTextOffTheTerminal: an error may quote a manifest's
// names (a tenant's, read by diff) or an API server's message; it is
// printed with its lines, without its control characters.
func TestErrorsKeepHostileTextOffTheTerminal(t *testing.T) {
	// Twice the same Role, whose name a YAML escape fills with controls.
	doc := "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: \"r\\e]0;x\\a\\e[2J\\rb\\x9b31m\\u202egnp.exe\"\n  namespace: team-a\n"
	file := filepath.Join(t.TempDir(), "roles.yaml")
	if err := os.WriteFile(file, []byte(doc+"---\n"+doc), 0o600); err != nil {
		t.Fatal(err)
	}
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	if code := Execute(context.Background(), streams, []string{"create", "web", "-n", "team-a", "--dry-run=client", "-f", file}); code != 1 {
		t.Fatalf("exit code %d, want 1; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut.String(), "error: the manifest does not parse:\n") || !strings.Contains(errOut.String(), "Role team-a/r") {
		t.Errorf("not the error of the duplicate Role:\n%q", errOut.String())
	}
	checkTerminal(t, "the error", errOut.String())

	// diff's errors, with its exit code: a definition of another kind.
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	def := "apiVersion: v1\nkind: \"Evil\\e]0;x\\a\\e[2J\\rb\\x9b31m\\u202egnp.exe\"\nmetadata:\n  name: web\n"
	if err := os.WriteFile(file, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	streams, _, out, errOut = genericiooptions.NewTestIOStreams()
	if code := Execute(context.Background(), streams, []string{"diff", "-f", file, "-n", "team-a", "--server", "https://127.0.0.1:1"}); code != diffError {
		t.Fatalf("exit code %d, want %d; stdout:\n%s\nstderr:\n%s", code, diffError, out, errOut)
	}
	if !strings.Contains(errOut.String(), "holds Evil") {
		t.Errorf("not the error of the definition:\n%q", errOut.String())
	}
	checkTerminal(t, "diff's error", errOut.String())
}

// -o json and -o yaml show what a tenant wrote exactly, as escapes where
// the terminal would act on it; YAML used to fail on a C1 control, and
// JSON to print it, and a bidirectional override, raw.
func TestStructuredOutputShowsHostileTextAsEscapes(t *testing.T) {
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a",
		Annotations: map[string]string{"note": hostile}}}
	vr.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Failed", Message: hostile}}
	for _, output := range []string{"json", "yaml"} {
		var obj, data strings.Builder
		if err := printObject(&obj, vr, output); err != nil {
			t.Fatalf("-o %s of a resource: %v", output, err)
		}
		if err := printData(&data, map[string]string{"message": hostile}, output); err != nil {
			t.Fatalf("-o %s of a tree: %v", output, err)
		}
		for what, out := range map[string]string{"a resource": obj.String(), "a tree": data.String()} {
			if output == "json" {
				checkTerminal(t, "-o json of "+what, out)
			} else if strings.ContainsRune(out, '\u009b') {
				t.Errorf("-o yaml of %s prints U+009B:\n%q", what, out)
			}
		}
	}
	// Exact: the JSON reads back as what was written.
	var b strings.Builder
	if err := printData(&b, map[string]string{"message": hostile}, "json"); err != nil {
		t.Fatal(err)
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(b.String()), &back); err != nil || back["message"] != hostile {
		t.Errorf("-o json reads back as %q (%v), want the text written", back["message"], err)
	}
}

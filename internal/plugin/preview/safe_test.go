// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package preview

import (
	"strings"
	"testing"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// hostile is what a tenant's API server may answer, or a tenant write: an
// OSC that sets the terminal's title, an erase of the screen, a carriage
// return, a C1 CSI and a right-to-left override.
const hostile = "a\x1b]0;x\a\x1b[2J\rb\u009b31m\u202egnp.exe"

// checkTerminal fails t if out, without the colours of Render, holds a
// control character other than '\n' and '\t', or a bidirectional
// override.
func checkTerminal(t *testing.T, what, out string) {
	t.Helper()
	plain := strings.NewReplacer(red, "", green, "", cyan, "", bold, "", reset, "").Replace(out)
	for _, r := range plain {
		if (unicode.IsControl(r) && r != '\n' && r != '\t') || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			t.Errorf("%s prints %U:\n%q", what, r, out)
			return
		}
	}
}

// TestRenderKeepsHostileTextOffTheTerminal: the header, the ---/+++ labels
// and the lines of a diff, a conflict naming the live object's owned-by
// annotation and an API server's message are printed without a control
// character (but the diff's newlines) or a bidirectional override.
func TestRenderKeepsHostileTextOffTheTerminal(t *testing.T) {
	live := marked(&v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{UID: "other"}}, "cm", true)
	live.SetAnnotations(map[string]string{v1alpha1.OwnedByAnnotation: "team-b/x" + hostile})
	got := planned(t, &memLive{objs: map[string]*unstructured.Unstructured{"ConfigMap ns/cm": live}}, newVR(), configMapDoc("cm")).Objects[0]
	if got.Action != ActionConflict || !strings.Contains(got.Message, "team-b/x") {
		t.Fatalf("the live object is taken for the resource's: %+v", got)
	}
	conflict := got.Message
	// The message and the labels are -o json's too.
	checkTerminal(t, "the conflict", conflict)

	// A Role's name is not checked as a DNS name: it may hold controls.
	role := Object{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role", Namespace: "team-a", Name: "r" + hostile, Action: ActionCreate}
	after := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "r", "annotations": map[string]any{"note": "x\u202egnp.exe"}}, "data": map[string]any{"k": "v\x1b[2J\r"}}}
	// The lines of a diff are the objects' YAML, which writes the control
	// characters, the format characters and the separators of a value as
	// escapes of a double-quoted scalar: valid YAML, the value unchanged.
	next, err := YAML(after)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(next, `k: "v\u001b[2J\u000d"`) || !strings.Contains(next, `note: "x\u202egnp.exe"`) {
		t.Errorf("YAML does not write what the test is about:\n%q", next)
	}
	// An object with a C1 control in a value used to be shown as refused
	// by the API server: the YAML reader refused it.
	if y, err := YAML(&unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"k": "b\u009b31m\u0085"}}}); err != nil || y != "data:\n  k: \"b\\u009b31m\\u0085\"\n" {
		t.Errorf("YAML of a C1 control: %q, %v; want it escaped", y, err)
	}
	checkTerminal(t, "the label", label("live", role))
	if role.Diff, err = UnifiedDiff("", next, label("live", role), label("vidra", role)); err != nil {
		t.Fatal(err)
	}
	r := &Result{Resource: "team-a/web" + hostile, Objects: []Object{
		role,
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "cm", Action: ActionConflict, Message: conflict},
		{APIVersion: "example.com/v1", Kind: "Widget" + hostile, Namespace: "team-a" + hostile, Name: "w" + hostile, Action: ActionError,
			Message: "the API server refuses the apply of Widget: " + hostile + "\nsecond line"},
	}}
	for _, color := range []bool{false, true} {
		var b strings.Builder
		if err := Render(&b, r, color); err != nil {
			t.Fatal(err)
		}
		checkTerminal(t, "Render", b.String())
		// Each line is a comment or a line of a patch: a message does not
		// split its header.
		plain := strings.NewReplacer(red, "", green, "", cyan, "", bold, "", reset, "").Replace(b.String())
		for _, line := range strings.Split(strings.TrimSuffix(plain, "\n"), "\n") {
			if line == "" || !strings.HasPrefix(line, "# ") && !strings.ContainsAny(line[:1], "@+- ") {
				t.Errorf("line %q is neither a comment nor a line of a patch:\n%s", line, b.String())
			}
		}
		if n := strings.Count(b.String(), "# "); n != 4 {
			t.Errorf("%d headers, want 4 (one an object, and the summary):\n%s", n, b.String())
		}
	}
}

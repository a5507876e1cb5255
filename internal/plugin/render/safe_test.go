// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"strings"
	"testing"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// hostile is what a tenant's API server may answer, or a tenant write: an
// OSC that sets the terminal's title, an erase of the screen, a carriage
// return, a C1 CSI and a right-to-left override that shows "gnp.exe" as
// "exe.png".
const hostile = "a\x1b]0;x\a\x1b[2J\rb\u009b31m\u202egnp.exe"

// isBidi tells the bidirectional embeddings, overrides and isolates.
func isBidi(r rune) bool {
	return (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069')
}

// checkTerminal fails t if out, without the colours the renderers add,
// holds a control character other than '\n' and '\t', a format
// character (such as a bidirectional override) or a separator.
func checkTerminal(t *testing.T, what, out string) {
	t.Helper()
	plain := strings.NewReplacer(red, "", green, "", yellow, "", bold, "", reset, "").Replace(out)
	for _, r := range plain {
		if (unicode.IsControl(r) && r != '\n' && r != '\t') || isBidi(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			t.Errorf("%s prints %U:\n%q", what, r, out)
			return
		}
	}
}

func TestSafe(t *testing.T) {
	tests := []struct{ in, safe, text, oneLine string }{
		{hostile, `a\x1b]0;x\a\x1b[2J\rb\u009b31m\u202egnp.exe`, `a\x1b]0;x\a\x1b[2J\rb\u009b31m\u202egnp.exe`, `a\x1b]0;x\a\x1b[2J b\u009b31m\u202egnp.exe`},
		{"ConfigMap team-a/web: Grüße, 世界 ✓ C:\\x", "ConfigMap team-a/web: Grüße, 世界 ✓ C:\\x", "ConfigMap team-a/web: Grüße, 世界 ✓ C:\\x", "ConfigMap team-a/web: Grüße, 世界 ✓ C:\\x"},
		{"two\tcells\nlines\r\n", `two\tcells\nlines\r\n`, "two\tcells\nlines\\r\n", "two cells lines"},
		{"del\x7f nul\x00 bel\a", `del\x7f nul\x00 bel\a`, `del\x7f nul\x00 bel\a`, `del\x7f nul\x00 bel\a`},
		// U+0085 is white space too: OneLine makes it a space.
		{"c1 \u0080\u0085\u009b\u009f", `c1 \u0080\u0085\u009b\u009f`, `c1 \u0080\u0085\u009b\u009f`, `c1 \u0080 \u009b\u009f`},
		{"bidi \u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c",
			`bidi \u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c`,
			`bidi \u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c`,
			`bidi \u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c`},
		{"invisible \u200bx\u200c\u200d\u2060\ufeff \u00ad\U000e0001", `invisible \u200bx\u200c\u200d\u2060\ufeff \u00ad\U000e0001`,
			`invisible \u200bx\u200c\u200d\u2060\ufeff \u00ad\U000e0001`, `invisible \u200bx\u200c\u200d\u2060\ufeff \u00ad\U000e0001`},
		{"separators a\u2028b\u2029c", `separators a\u2028b\u2029c`, `separators a\u2028b\u2029c`, "separators a b c"},
		// An 8-bit C1 CSI, not UTF-8.
		{"raw \x9b31m", `raw \x9b31m`, `raw \x9b31m`, `raw \x9b31m`},
	}
	for _, tc := range tests {
		if got := Safe(tc.in); got != tc.safe {
			t.Errorf("Safe(%q) = %q, want %q", tc.in, got, tc.safe)
		}
		if got := SafeText(tc.in); got != tc.text {
			t.Errorf("SafeText(%q) = %q, want %q", tc.in, got, tc.text)
		}
		if got := OneLine(tc.in); got != tc.oneLine {
			t.Errorf("OneLine(%q) = %q, want %q", tc.in, got, tc.oneLine)
		}
	}

	// Whatever the rune, none that a terminal acts on is left: those of
	// the blocks that hold controls and format characters.
	var b strings.Builder
	for _, block := range [][2]rune{{0, 0x3000}, {0xfe00, 0x10000}, {0x1d170, 0x1d180}, {0xe0000, 0xe0080}} {
		for r := block[0]; r < block[1]; r++ {
			b.WriteRune(r)
		}
	}
	all := b.String()
	checkTerminal(t, "Safe", Safe(all))
	checkTerminal(t, "SafeText", SafeText(all))
	checkTerminal(t, "OneLine", OneLine(all))
	for _, r := range Safe(all) {
		if r == '\n' || r == '\t' {
			t.Fatalf("Safe keeps %U", r)
		}
	}

	if n := testing.AllocsPerRun(100, func() { _ = Safe("ConfigMap team-a/web (document 2): owned by VidraResource team-b/other") }); n != 0 {
		t.Errorf("Safe of a plain message allocates %v times", n)
	}
}

// hostileResource is a resource whose every field a tenant, or a tenant's
// API server, writes holds hostile.
func hostileResource() (*v1alpha1.VidraResource, []corev1.Event) {
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "web" + hostile, Namespace: "team-a" + hostile, Generation: 1, UID: "u1", CreationTimestamp: ago(time.Hour)}}
	vr.Spec.DriftPolicy = v1alpha1.DriftPolicyReport
	vr.Status.ObservedGeneration = 1
	vr.Status.DeployState = v1alpha1.DeployState("Failed" + hostile)
	// An object error, one with an object named by the message (as a
	// server's message may forge one) and one that is not an object's;
	// the names without white space, which would not name an object.
	word := strings.ReplaceAll(hostile, "\r", "")
	message := "Role team-a/r" + word + " (document 1): " + hostile + "; Evil" + word + " x (document 2): y; " + hostile
	vr.Status.Conditions = []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: "False" + hostile, Reason: "ApplyFailed" + hostile, Message: message, ObservedGeneration: 1, LastTransitionTime: ago(time.Minute)},
		{Type: v1alpha1.ConditionConflict, Status: metav1.ConditionTrue, Reason: "FieldConflict", Message: "Role team-a/r" + hostile + ": " + hostile, ObservedGeneration: 1, LastTransitionTime: ago(time.Minute)},
		{Type: v1alpha1.ConditionHealthy, Status: metav1.ConditionFalse, Reason: "Degraded" + hostile, Message: hostile, ObservedGeneration: 1, LastTransitionTime: ago(time.Minute)},
		// Conditions of types of someone else's, one saying what the other says.
		{Type: "X" + hostile, Status: metav1.ConditionTrue, Reason: "R", Message: "m" + hostile, ObservedGeneration: 1, LastTransitionTime: ago(time.Minute)},
		{Type: "Y" + hostile, Status: metav1.ConditionTrue, Reason: "R", Message: "m" + hostile, ObservedGeneration: 1, LastTransitionTime: ago(time.Minute)},
	}
	vr.Status.ManagedResources = []v1alpha1.ManagedResource{
		{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role", Namespace: "team-a", Name: "r" + hostile, Health: "Current"},
		{APIVersion: "example.com/v1", Kind: "Widget" + hostile, Namespace: "team-a" + hostile, Name: "w" + hostile, Health: "Failed" + hostile, HealthMessage: hostile},
	}
	vr.Status.Drift = []v1alpha1.DriftRecord{{APIVersion: "example.com/v1", Kind: "Widget" + hostile, Namespace: "team-a" + hostile, Name: "w" + hostile,
		Fields: []string{"/spec/" + hostile}, Manager: "m" + hostile, Time: ago(time.Minute)}}
	vr.Status.DriftHistory = []v1alpha1.DriftRecord{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role", Namespace: "team-a", Name: "r" + hostile,
		Fields: []string{"/rules"}, Manager: "m" + hostile, Time: ago(time.Minute)}}
	events := []corev1.Event{{Type: corev1.EventTypeWarning, Reason: "R" + hostile, Message: hostile, Count: 2, LastTimestamp: ago(time.Minute),
		InvolvedObject: corev1.ObjectReference{Name: vr.Name, UID: vr.UID}}}
	return vr, events
}

// TestRenderersKeepHostileTextOffTheTerminal: get's table, tree and why
// print what tenants and their API servers write without a control
// character or a bidirectional override, in colour or not.
func TestRenderersKeepHostileTextOffTheTerminal(t *testing.T) {
	vr, events := hostileResource()
	for _, color := range []bool{false, true} {
		o := Options{Now: now, Color: color}
		t.Run("get", func(t *testing.T) {
			var b strings.Builder
			if err := Table(&b, []v1alpha1.VidraResource{*vr}, TableOptions{Options: o, AllNamespaces: true, Wide: true}); err != nil {
				t.Fatal(err)
			}
			checkTerminal(t, "the table", b.String())
		})
		t.Run("tree", func(t *testing.T) {
			var b strings.Builder
			if err := WriteTree(&b, NewTree(vr), o); err != nil {
				t.Fatal(err)
			}
			checkTerminal(t, "the tree", b.String())
			if lines := strings.Count(b.String(), "\n"); lines != 2+len(vr.Status.ManagedResources) {
				t.Errorf("the tree has %d lines, want one a row:\n%s", lines, b.String())
			}
			// Without objects, the resource's row says the conflict.
			alone := vr.DeepCopy()
			alone.Status.ManagedResources = nil
			b.Reset()
			if err := WriteTree(&b, NewTree(alone), o); err != nil {
				t.Fatal(err)
			}
			checkTerminal(t, "the tree of a resource without objects", b.String())
		})
		t.Run("why", func(t *testing.T) {
			x := Explain(vr, events, now)
			if len(x.Failing) < 3 || len(x.Problems) == 0 || len(x.Events) == 0 {
				t.Fatalf("the explanation does not hold what the test is about: %+v", x)
			}
			var b strings.Builder
			if err := WriteExplanation(&b, x, o); err != nil {
				t.Fatal(err)
			}
			checkTerminal(t, "the explanation", b.String())
		})
	}
}

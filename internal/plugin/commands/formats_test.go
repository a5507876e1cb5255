// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/plugin/preview"
	"github.com/vidra-operator/vidra/internal/plugin/render"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// escapedRunes are the runes every format escapes: each of categories Cc
// (C0 with ESC and CR, DEL, C1), Cf (the bidirectional controls, the
// zero-width ones, U+FEFF, U+2060, the tag characters), Zl and Zp.
func escapedRunes() []rune {
	var runes []rune
	for _, table := range []*unicode.RangeTable{unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp} {
		for _, r16 := range table.R16 {
			for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
				runes = append(runes, r)
			}
		}
		for _, r32 := range table.R32 {
			for r := rune(r32.Lo); r <= rune(r32.Hi); r += rune(r32.Stride) {
				runes = append(runes, r)
			}
		}
	}
	return runes
}

// resourceWith is a resource whose every field a tenant or its API
// server writes holds v.
func resourceWith(v string) (*v1alpha1.VidraResource, []corev1.Event) {
	// In whole seconds, as JSON and YAML write a time.
	now := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	vr := &v1alpha1.VidraResource{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "VidraResource"},
		ObjectMeta: metav1.ObjectMeta{Name: "web" + v, Namespace: "team-a" + v, Generation: 1, UID: "u1", Annotations: map[string]string{"note" + v: v}},
	}
	vr.Spec.DriftPolicy = v1alpha1.DriftPolicyReport
	vr.Status.ObservedGeneration = 1
	vr.Status.Conditions = []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Failed" + v, Message: "ConfigMap team-a/c" + v + " (document 1): " + v + "; " + v, ObservedGeneration: 1, LastTransitionTime: now},
		{Type: v1alpha1.ConditionConflict, Status: metav1.ConditionTrue, Reason: "FieldConflict", Message: "ConfigMap team-a/c" + v + ": " + v, ObservedGeneration: 1, LastTransitionTime: now},
	}
	vr.Status.ManagedResources = []v1alpha1.ManagedResource{{APIVersion: "v1", Kind: "ConfigMap" + v, Namespace: "team-a" + v, Name: "c" + v, Health: "Failed" + v, HealthMessage: v}}
	vr.Status.Drift = []v1alpha1.DriftRecord{{APIVersion: "v1", Kind: "ConfigMap" + v, Namespace: "team-a" + v, Name: "c" + v, Fields: []string{"/data/" + v}, Manager: "m" + v, Time: now}}
	events := []corev1.Event{{Type: corev1.EventTypeWarning, Reason: "R" + v, Message: v, Count: 2, LastTimestamp: now, InvolvedObject: corev1.ObjectReference{Name: vr.Name, UID: vr.UID}}}
	return vr, events
}

// classes are the kinds of rune every format escapes, one of each, and
// all the runes of escapedRunes at once.
func classes() []struct {
	name  string
	runes string
} {
	c := []struct {
		name  string
		runes string
	}{
		{"C0 NUL", "\x00"}, {"C0 BEL", "\a"}, {"C0 BS", "\b"}, {"C0 ESC", "\x1b"}, {"C0 CR", "\r"}, {"C0 VT", "\v"}, {"C0 FF", "\f"},
		{"DEL", "\x7f"}, {"C1 NEL", "\u0085"}, {"C1 CSI", "\u009b"}, {"C1 OSC", "\u009d"}, {"C1 ST", "\u009c"},
		{"bidi embeddings and overrides", "\u202a\u202b\u202c\u202d\u202e"}, {"bidi isolates", "\u2066\u2067\u2068\u2069"},
		{"bidi marks", "\u200e\u200f\u061c"}, {"zero-width", "\u200b\u200c\u200d"}, {"word joiner", "\u2060"}, {"BOM", "\ufeff"},
		{"soft hyphen", "\u00ad"}, {"tag characters", "\U000e0001\U000e0041"}, {"line separator", "\u2028"}, {"paragraph separator", "\u2029"},
	}
	all := escapedRunes()
	c = append(c, struct {
		name  string
		runes string
	}{fmt.Sprintf("all %d runes of Cc, Cf, Zl and Zp", len(all)), string(all)})
	return c
}

// TestEveryFormatEscapesEveryRune: get (table, wide, -o name, -o json,
// -o yaml), tree, why and reconcile (text, -o json, -o yaml) and diff
// (text, -o json, -o yaml) print no control, format or separator rune of
// what a tenant wrote, but '\n' and '\t' between lines and cells; and
// -o json and -o yaml read back as the very value written.
func TestEveryFormatEscapesEveryRune(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 1, 0, 0, time.UTC)
	for _, c := range classes() {
		t.Run(c.name, func(t *testing.T) {
			v := `a"\` + c.runes + "b"
			vr, events := resourceWith(v)
			tree, why := render.NewTree(vr), render.Explain(vr, events, now)
			cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "c", "annotations": map[string]any{"note": v}}, "data": map[string]any{"k" + v: v + "\nline"}}}
			after, err := preview.YAML(cm)
			if err != nil {
				t.Fatal(err)
			}
			diff, err := preview.UnifiedDiff("", after, "live", "vidra")
			if err != nil {
				t.Fatal(err)
			}
			result := &preview.Result{Resource: "team-a/web" + v, Objects: []preview.Object{
				{APIVersion: "v1", Kind: "ConfigMap" + v, Namespace: "team-a", Name: "c" + v, Action: preview.ActionCreate, Diff: diff, Message: v},
			}}

			text := map[string]func(*strings.Builder) error{
				"get": func(b *strings.Builder) error {
					return render.Table(b, []v1alpha1.VidraResource{*vr}, render.TableOptions{Options: render.Options{Now: now}, AllNamespaces: true})
				},
				"get -o wide": func(b *strings.Builder) error {
					return render.Table(b, []v1alpha1.VidraResource{*vr}, render.TableOptions{Options: render.Options{Now: now}, Wide: true})
				},
				"get -o name": func(b *strings.Builder) error { return printObject(b, vr, "name") },
				"tree":        func(b *strings.Builder) error { return render.WriteTree(b, tree, render.Options{Now: now}) },
				"why":         func(b *strings.Builder) error { return render.WriteExplanation(b, why, render.Options{Now: now}) },
				"diff":        func(b *strings.Builder) error { return preview.Render(b, result, false) },
				"reconcile": func(b *strings.Builder) error {
					streams, _, out, _ := genericiooptions.NewTestIOStreams()
					err := writeOutcome(&root{streams: streams}, vr)
					b.WriteString(out.String())
					return err
				},
			}
			for name, write := range text {
				var b strings.Builder
				if err := write(&b); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				checkEscaped(t, name, b.String())
			}
			if !strings.Contains(after, `\u`) && !strings.Contains(after, `\U`) {
				t.Errorf("the diff's YAML holds no escape:\n%s", after)
			}
			checkEscaped(t, "the diff's YAML", after)

			for _, output := range []string{"json", "yaml"} {
				structured := []struct {
					what string
					v    any
					back func() any
				}{
					{"get", vr, func() any { return &v1alpha1.VidraResource{} }},
					{"tree", tree, func() any { return &render.Tree{} }},
					{"why", why, func() any { return &render.Explanation{} }},
					{"diff", result, func() any { return &preview.Result{} }},
				}
				for _, s := range structured {
					var b strings.Builder
					var err error
					if s.what == "get" {
						err = printObject(&b, vr, output)
					} else {
						err = printData(&b, s.v, output)
					}
					if err != nil {
						t.Fatalf("%s -o %s: %v", s.what, output, err)
					}
					what := s.what + " -o " + output
					checkEscaped(t, what, b.String())
					back := s.back()
					if output == "json" {
						err = json.Unmarshal([]byte(b.String()), back)
					} else {
						err = yaml.Unmarshal([]byte(b.String()), back)
					}
					if err != nil {
						t.Fatalf("%s does not read back: %v\n%s", what, err, b.String())
					}
					if diff := cmp.Diff(s.v, back); diff != "" {
						t.Errorf("%s reads back otherwise (-written +read):\n%s", what, diff)
					}
				}
			}
		})
	}
}

// checkEscaped fails t if out holds a control (but '\n' and '\t'), a
// format character or a separator.
func checkEscaped(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && r != '\t' && render.Escaped(r) {
			t.Errorf("%s prints %U:\n%q", what, r, out)
			return
		}
	}
}

// The API server's warnings, which an admission webhook words, are
// printed escaped, on one line.
func TestWarningsEscapeEveryRune(t *testing.T) {
	for _, r := range escapedRunes() {
		var b strings.Builder
		warnings{&b}.HandleWarningHeader(299, "-", "image a"+string(r)+"b\nis deprecated")
		if !strings.HasPrefix(b.String(), "Warning: image a") || strings.Count(b.String(), "\n") != 1 {
			t.Errorf("warning %q", b.String())
		}
		checkEscaped(t, fmt.Sprintf("the warning of %U", r), b.String())
	}
}

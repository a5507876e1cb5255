// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package preview

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func TestCleanDropsWhatEveryWriteChanges(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": "a", "namespace": "ns", "uid": "1", "resourceVersion": "7", "generation": int64(2),
			"creationTimestamp": "2026-01-01T00:00:00Z", "managedFields": []any{map[string]any{"manager": "vidra"}},
			"labels": map[string]any{"app": "web"},
		},
		"data":   map[string]any{"k": "v"},
		"status": map[string]any{"phase": "Active"},
	}}
	got, err := YAML(u)
	if err != nil {
		t.Fatal(err)
	}
	want := "apiVersion: v1\ndata:\n  k: v\nkind: ConfigMap\nmetadata:\n  labels:\n    app: web\n  name: a\n  namespace: ns\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("YAML (-want +got):\n%s", diff)
	}
	if _, ok := u.Object["status"]; !ok {
		t.Error("Clean changed its argument")
	}
}

func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name, before, after, want string
	}{
		{name: "equal", before: "a: 1\n", after: "a: 1\n", want: ""},
		{name: "changed", before: "a: 1\nb: 1\n", after: "a: 1\nb: 2\n",
			want: "--- live\n+++ vidra\n@@ -1,2 +1,2 @@\n a: 1\n-b: 1\n+b: 2\n"},
		{name: "created", before: "", after: "a: 1\n", want: "--- live\n+++ vidra\n@@ -0,0 +1 @@\n+a: 1\n"},
		{name: "deleted", before: "a: 1\n", after: "", want: "--- live\n+++ vidra\n@@ -1 +0,0 @@\n-a: 1\n"},
		{name: "no final newline", before: "a: 1", after: "a: 2", want: "--- live\n+++ vidra\n@@ -1 +1 @@\n-a: 1\n+a: 2\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := UnifiedDiff(tc.before, tc.after, "live", "vidra")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("diff (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderShowsChangesAndCountsTheRest(t *testing.T) {
	r := &Result{Resource: "ns/web", Objects: []Object{
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "a", Action: ActionUnchanged},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "b", Action: ActionChange, Diff: "--- live\n+++ vidra\n@@ -1 +1 @@\n-x: 1\n+x: 2\n"},
		{APIVersion: "v1", Kind: "Namespace", Name: "old", Action: ActionKeep, Message: "prune refused"},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c", Action: ActionConflict, Message: "not ours"},
	}}
	var b strings.Builder
	if err := Render(&b, r, false); err != nil {
		t.Fatal(err)
	}
	want := `# ConfigMap ns/b: change
--- live
+++ vidra
@@ -1 +1 @@
-x: 1
+x: 2
# Namespace old: keep (prune refused)
# ConfigMap ns/c: conflict (not ours)
# ns/web: 1 to change, 1 kept (prune refused), 1 in conflict, 1 unchanged
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("Render (-want +got):\n%s", diff)
	}
	if !r.Differs() || r.Failed() {
		t.Errorf("Differs %v, Failed %v; want true, false", r.Differs(), r.Failed())
	}

	b.Reset()
	if err := Render(&b, r, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), green+"+x: 2"+reset) || !strings.Contains(b.String(), red+"-x: 1"+reset) {
		t.Errorf("colours missing:\n%q", b.String())
	}
}

func TestDiffersOnlyOnChanges(t *testing.T) {
	for a, want := range map[Action]bool{
		ActionCreate: true, ActionChange: true, ActionPrune: true, ActionRelease: true, ActionConflict: true,
		ActionUnchanged: false, ActionKeep: false, ActionIgnore: false, ActionError: false,
	} {
		r := &Result{Objects: []Object{{Action: a}}}
		if r.Differs() != want {
			t.Errorf("%s: Differs %v, want %v", a, r.Differs(), want)
		}
	}
}

// An object marked as another resource's is not written while that
// resource holds it; the preview does not look the owner up, so it tells
// what happens in either case, and whether this resource adopts orphans.
func TestNotOursNamesHandoverAndAdoption(t *testing.T) {
	live := &unstructured.Unstructured{}
	live.SetLabels(map[string]string{v1alpha1.OwnerUIDLabel: "other-uid"})
	live.SetAnnotations(map[string]string{v1alpha1.OwnedByAnnotation: "team-a/other"})
	for _, adopt := range []bool{false, true} {
		vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{UID: "mine"}, Spec: v1alpha1.VidraResourceSpec{AdoptOrphans: adopt}}
		msg, foreign := notOurs(vr, live)
		want := "adopted only with spec.adoptOrphans"
		if adopt {
			want = "spec.adoptOrphans adopts it"
		}
		if !foreign || !strings.Contains(msg, "team-a/other") || !strings.Contains(msg, "handed over") || !strings.Contains(msg, want) {
			t.Errorf("adoptOrphans %v: %q (foreign %v), want the owner, the handover and %q", adopt, msg, foreign, want)
		}
	}
}

// A failing object holds back only the prunes of its own kind and name
// (it may be that object, moved), as the operator does: the preview holds
// those and counts them apart, and lets every other prune go ahead.
func TestPrunesAreHeldWhileAnObjectFails(t *testing.T) {
	for _, failing := range []Action{ActionError, ActionConflict, ""} {
		res := &Result{Resource: "ns/r", Objects: []Object{
			{Kind: "ConfigMap", Namespace: "other", Name: "gone", Action: ActionCreate},
			{Kind: "ConfigMap", Namespace: "ns", Name: "gone", Action: ActionPrune, Diff: "-data"},
			{Kind: "ConfigMap", Namespace: "ns", Name: "kept", Action: ActionRelease},
			{Kind: "Secret", Namespace: "ns", Name: "gone", Action: ActionPrune},
			{Kind: "Namespace", Name: "n", Action: ActionKeep},
			// A prune that cannot be previewed holds no other: the
			// operator goes on with the rest.
			{Kind: "ConfigMap", Namespace: "ns", Name: "unread", Action: ActionError},
		}}
		if failing != "" {
			res.Objects[0].Action = failing
		}
		holdPrunes(res, 1, false)
		got := []Action{res.Objects[1].Action, res.Objects[2].Action, res.Objects[3].Action, res.Objects[4].Action, res.Objects[5].Action}
		want := []Action{ActionHeld, ActionRelease, ActionPrune, ActionKeep, ActionError}
		if failing == "" {
			want = []Action{ActionPrune, ActionRelease, ActionPrune, ActionKeep, ActionError}
		}
		if !slices.Equal(got, want) {
			t.Errorf("with %q: actions %v, want %v", failing, got, want)
		}
		if failing != "" && (res.Objects[1].Diff != "" || !strings.Contains(res.Objects[1].Message, "ConfigMap other/gone")) {
			t.Errorf("with %q: held prune %+v, want no diff and a message naming the failing object", failing, res.Objects[1])
		}
		if failing != "" && !strings.Contains(Summary(res), "1 held back") {
			t.Errorf("with %q: summary %q", failing, Summary(res))
		}
	}
}

// Marks of this resource on an object Vidra's apply never wrote (a copy
// created in its place) make it no more this resource's in the preview
// than in the operator.
func TestNotOursRefusesACopyCarryingThisResourcesMarks(t *testing.T) {
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{UID: "mine"}}
	live := &unstructured.Unstructured{}
	live.SetLabels(map[string]string{v1alpha1.OwnerUIDLabel: "mine"})
	if msg, foreign := notOurs(vr, live); !foreign || !strings.Contains(msg, v1alpha1.ReasonUnmanagedExists) {
		t.Errorf("a copy: %q (foreign %v), want %s", msg, foreign, v1alpha1.ReasonUnmanagedExists)
	}
	live.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply}})
	if msg, foreign := notOurs(vr, live); foreign {
		t.Errorf("an object Vidra applied: %q, want it this resource's", msg)
	}
}

// With spec.adoptOrphans, a conflict over another resource's object may be
// an adoption the preview cannot confirm: the held prune says so.
func TestAHeldPruneSaysAnAdoptionWouldFreeIt(t *testing.T) {
	res := &Result{Objects: []Object{
		{Kind: "ConfigMap", Namespace: "ns", Name: "leftover", Action: ActionConflict, Message: markedAsAnother + "ns/gone: ..."},
		{Kind: "ConfigMap", Namespace: "old", Name: "leftover", Action: ActionPrune},
	}}
	holdPrunes(res, 1, true)
	if o := res.Objects[1]; o.Action != ActionHeld || !strings.Contains(o.Message, "once adopted") {
		t.Errorf("prune %+v, want held, saying an adoption would let it go ahead", o)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package preview

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/manifest"
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
		ActionCreate: true, ActionChange: true, ActionPrune: true, ActionRelease: true, ActionHandOver: true, ActionConflict: true,
		ActionUnchanged: false, ActionKeep: false, ActionIgnore: false, ActionError: false,
	} {
		r := &Result{Objects: []Object{{Action: a}}}
		if r.Differs() != want {
			t.Errorf("%s: Differs %v, want %v", a, r.Differs(), want)
		}
	}
}

// An object marked as another live resource's is not written; the
// preview says so as the operator does, naming the owner and the
// hand-over. One whose owner is gone is adopted only with
// spec.adoptOrphans, which the preview says too.
func TestAConflictNamesTheOwnerTheHandoverAndAdoption(t *testing.T) {
	owner := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "other", UID: "other-uid"}}
	for _, live := range []bool{true, false} {
		l := &memLive{objs: map[string]*unstructured.Unstructured{"ConfigMap ns/a": marked(owner, "a", true)}}
		if live {
			l.resources = []*v1alpha1.VidraResource{owner}
		}
		res := planned(t, l, newVR(), configMapDoc("a"))
		o := res.Objects[0]
		want := []string{"team-a/other", "handed over"}
		if !live {
			want = []string{"team-a/other", "spec.adoptOrphans takes it over"}
		}
		for _, w := range want {
			if o.Action != ActionConflict || !strings.Contains(o.Message, w) {
				t.Errorf("owner live %v: %s (%q), want a conflict saying %q", live, o.Action, o.Message, w)
			}
		}
	}
}

// A failing object holds back only the prunes of its own kind and name
// (it may be that object, moved), as the operator does: the preview holds
// those and counts them apart, and lets every other prune go ahead.
func TestPrunesAreHeldWhileAnObjectFails(t *testing.T) {
	vr := newVR()
	vr.Status.ManagedResources = []v1alpha1.ManagedResource{
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "gone"},
		{APIVersion: "v1", Kind: "Secret", Namespace: "ns", Name: "gone"},
	}
	for _, failing := range []bool{true, false} {
		l := &memLive{objs: map[string]*unstructured.Unstructured{
			"ConfigMap ns/gone": marked(vr, "gone", true),
			"Secret ns/gone":    marked(vr, "gone", true),
		}}
		l.objs["Secret ns/gone"].SetKind("Secret")
		if failing {
			// Someone else's object of the same kind and name where the
			// manifest now puts it: a conflict.
			l.objs["ConfigMap other/gone"] = marked(&v1alpha1.VidraResource{}, "gone", false)
			l.objs["ConfigMap other/gone"].SetNamespace("other")
		}
		res := planned(t, l, vr, configMapDoc("gone")+"  namespace: other\n")
		var got []Action
		for _, o := range res.Objects[1:] {
			got = append(got, o.Action)
		}
		want := []Action{ActionHeld, ActionPrune}
		if !failing {
			want = []Action{ActionPrune, ActionPrune}
		}
		if !slices.Equal(got, want) {
			t.Errorf("failing %v: actions %v, want %v", failing, got, want)
		}
		if failing && (res.Objects[1].Diff != "" || !strings.Contains(res.Objects[1].Message, "ConfigMap other/gone")) {
			t.Errorf("held prune %+v, want no diff and a message naming the failing object", res.Objects[1])
		}
		if failing && !strings.Contains(Summary(res), "1 held back") {
			t.Errorf("summary %q", Summary(res))
		}
	}
}

// Marks of this resource on an object Vidra's apply never wrote (a copy
// created in its place) make it no more this resource's in the preview
// than in the operator.
func TestACopyCarryingThisResourcesMarksIsAConflict(t *testing.T) {
	vr := newVR()
	l := &memLive{objs: map[string]*unstructured.Unstructured{"ConfigMap ns/a": marked(vr, "a", false)}}
	if o := planned(t, l, vr, configMapDoc("a")).Objects[0]; o.Action != ActionConflict || !strings.Contains(o.Message, "never applied by Vidra") {
		t.Errorf("a copy: %s (%q), want a conflict: never applied by Vidra", o.Action, o.Message)
	}
}

// memLive is the engine's LiveReader over objects in memory, keyed
// "Kind ns/name", for decisions that need no dry run.
type memLive struct {
	objs      map[string]*unstructured.Unstructured
	resources []*v1alpha1.VidraResource
}

func (l *memLive) Get(_ context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	if u := l.objs[gvk.Kind+" "+namespace+"/"+name]; u != nil {
		return u.DeepCopy(), nil
	}
	return nil, nil
}

func (l *memLive) Resources(context.Context) ([]*v1alpha1.VidraResource, bool, error) {
	return l.resources, true, nil
}

func (l *memLive) Changes(context.Context, *unstructured.Unstructured, *unstructured.Unstructured) (bool, error) {
	return false, nil
}

// newVR is resource ns/web, reconciled.
func newVR() *v1alpha1.VidraResource {
	return &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "web-uid"}}
}

func configMapDoc(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
}

// marked is ConfigMap ns/name marked as vr's, applied by Vidra or not.
func marked(vr *v1alpha1.VidraResource, name string, applied bool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetNamespace("ns")
	u.SetName(name)
	if vr.UID != "" {
		u.SetLabels(map[string]string{v1alpha1.OwnerUIDLabel: string(vr.UID)})
		u.SetAnnotations(map[string]string{v1alpha1.OwnedByAnnotation: vr.Namespace + "/" + vr.Name})
	}
	if applied {
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply}})
	}
	return u
}

// planned renders the engine's plan of manifest over l, for decisions
// that need no request.
func planned(t *testing.T, l *memLive, vr *v1alpha1.VidraResource, text string) *Result {
	t.Helper()
	objs, errs := manifest.Parse(text)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	ds, err := apply.Plan(t.Context(), apply.PlanInput{VR: vr, Objects: objs,
		Namespaced: func(schema.GroupVersionKind) (bool, error) { return true, nil }}, l)
	if err != nil {
		t.Fatal(err)
	}
	r := &reader{}
	res := &Result{Resource: vr.Namespace + "/" + vr.Name}
	for _, d := range ds {
		if d.Action == apply.PlanCreate {
			// Its dry run is the control-plane tests' business.
			res.Objects = append(res.Objects, objectOf(d.Object, ActionCreate))
			continue
		}
		res.Objects = append(res.Objects, r.render(t.Context(), d))
	}
	return res
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// planLive is a LiveReader over objects held in memory.
type planLive struct {
	objs      map[string]*unstructured.Unstructured
	resources []*v1alpha1.VidraResource
	// changes is what Changes answers; asked tells it was asked.
	changes, asked bool
}

func (l *planLive) Get(_ context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	if u := l.objs[gvk.Kind+" "+namespace+"/"+name]; u != nil {
		return u.DeepCopy(), nil
	}
	return nil, nil
}

func (l *planLive) Resources(context.Context) ([]*v1alpha1.VidraResource, bool, error) {
	return l.resources, true, nil
}

func (l *planLive) Changes(context.Context, *unstructured.Unstructured, *unstructured.Unstructured) (bool, error) {
	l.asked = true
	return l.changes, nil
}

func planScope(gvk schema.GroupVersionKind) (bool, error) { return gvk.Kind != "Namespace", nil }

// planVR is resource shop/web, of UID "web", reconciled at generation 1,
// whose inventory holds ConfigMaps a and old and Namespace gone-ns.
func planVR() *v1alpha1.VidraResource {
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "web", Generation: 1}}
	vr.Status.ObservedGeneration = 1
	vr.Status.ManagedResources = []v1alpha1.ManagedResource{
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "a"},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "old"},
		{APIVersion: "v1", Kind: "Namespace", Name: "gone-ns"},
	}
	return vr
}

// applied is the object of kind and name as vr's apply left it, with data.
func applied(vr *v1alpha1.VidraResource, kind, namespace, name string, data map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": name}}}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	if data != nil {
		u.Object["data"] = data
	}
	u = mark(u, vr)
	u.SetResourceVersion("7")
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply}})
	return u
}

type planCase struct {
	name     string
	manifest string
	vr       func(*v1alpha1.VidraResource)
	// live are the objects on the destination, keyed "Kind ns/name";
	// resources the VidraResources besides the planned one.
	live      func(vr *v1alpha1.VidraResource) map[string]*unstructured.Unstructured
	resources []*v1alpha1.VidraResource
	changes   bool
	// want is the actions of the decisions, "Kind ns/name=Action".
	want  []string
	check func(t *testing.T, ds []Decision)
}

const planManifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n"

func planCases() []planCase {
	ours := func(data map[string]any) func(*v1alpha1.VidraResource) map[string]*unstructured.Unstructured {
		return func(vr *v1alpha1.VidraResource) map[string]*unstructured.Unstructured {
			return map[string]*unstructured.Unstructured{"ConfigMap shop/a": applied(vr, "ConfigMap", "shop", "a", data)}
		}
	}
	other := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "other", UID: "other"}}
	other.Spec.Manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: old\n"
	return []planCase{
		{name: "an absent object is created", manifest: planManifest, want: []string{"ConfigMap shop/a=Create"}},
		{name: "an object as the manifest says is in sync", manifest: planManifest, live: ours(map[string]any{"k": "v"}),
			want: []string{"ConfigMap shop/a=InSync"}},
		{name: "a changed manifest is applied", manifest: planManifest, live: ours(map[string]any{"k": "x"}),
			vr: func(vr *v1alpha1.VidraResource) { vr.Generation = 2 }, want: []string{"ConfigMap shop/a=Apply"}},
		{name: "a manifest that dropped a field is applied when the apply changes live", manifest: planManifest,
			live: ours(map[string]any{"k": "v", "dropped": "1"}), changes: true,
			vr: func(vr *v1alpha1.VidraResource) { vr.Generation = 2 }, want: []string{"ConfigMap shop/a=Apply"}},
		{name: "a drifted object is reported under driftPolicy Report", manifest: planManifest, live: ours(map[string]any{"k": "x"}),
			vr: func(vr *v1alpha1.VidraResource) { vr.Spec.DriftPolicy = v1alpha1.DriftPolicyReport }, want: []string{"ConfigMap shop/a=ReportDrift"}},
		{name: "an object without marks is a conflict", manifest: planManifest,
			live: func(*v1alpha1.VidraResource) map[string]*unstructured.Unstructured {
				return map[string]*unstructured.Unstructured{"ConfigMap shop/a": configMapNamed("shop", "a")}
			},
			want: []string{"ConfigMap shop/a=Conflict"}, check: wantReason(0, v1alpha1.ReasonUnmanagedExists)},
		{name: "an object without marks is a conflict for a resource not created yet", manifest: planManifest,
			vr: func(vr *v1alpha1.VidraResource) { vr.UID, vr.Status = "", v1alpha1.VidraResourceStatus{} },
			live: func(*v1alpha1.VidraResource) map[string]*unstructured.Unstructured {
				return map[string]*unstructured.Unstructured{"ConfigMap shop/a": configMapNamed("shop", "a")}
			},
			want: []string{"ConfigMap shop/a=Conflict"}, check: func(t *testing.T, ds []Decision) {
				if !strings.Contains(ds[0].Err.Error(), "not managed by Vidra") {
					t.Errorf("%v, want it said not managed by Vidra", ds[0].Err)
				}
			}},
		{name: "another live resource's object is a conflict", manifest: planManifest, live: ours(map[string]any{"k": "v"}),
			vr: func(vr *v1alpha1.VidraResource) { vr.UID = "new" }, resources: []*v1alpha1.VidraResource{planVR()},
			want: []string{"ConfigMap shop/a=Conflict"}, check: wantReason(0, v1alpha1.ReasonOwnedByOther)},
		{name: "a gone resource's object is adopted with spec.adoptOrphans", manifest: planManifest, live: ours(map[string]any{"k": "v"}),
			vr:   func(vr *v1alpha1.VidraResource) { vr.UID, vr.Spec.AdoptOrphans = "new", true },
			want: []string{"ConfigMap shop/a=Apply"}, check: func(t *testing.T, ds []Decision) {
				if !strings.Contains(ds[0].Adopts, "shop/web") {
					t.Errorf("Adopts %q, want the gone resource named", ds[0].Adopts)
				}
			}},
		{name: "a gone resource's object is a conflict without spec.adoptOrphans", manifest: planManifest, live: ours(map[string]any{"k": "v"}),
			vr: func(vr *v1alpha1.VidraResource) { vr.UID = "new" }, want: []string{"ConfigMap shop/a=Conflict"}},
		{name: "an object of apply Ignore is ignored", manifest: strings.Replace(planManifest, "  name: a\n",
			"  name: a\n  annotations:\n    "+v1alpha1.ApplyPolicyAnnotation+": Ignore\n", 1), want: []string{"ConfigMap shop/a=Ignore"}},
	}
}

// planPruneCases are the decisions on objects that left the manifest.
func planPruneCases() []planCase {
	leftovers := func(mutate func(old, ns *unstructured.Unstructured)) func(*v1alpha1.VidraResource) map[string]*unstructured.Unstructured {
		return func(vr *v1alpha1.VidraResource) map[string]*unstructured.Unstructured {
			objs := map[string]*unstructured.Unstructured{
				"ConfigMap shop/a":   applied(vr, "ConfigMap", "shop", "a", map[string]any{"k": "v"}),
				"ConfigMap shop/old": applied(vr, "ConfigMap", "shop", "old", nil),
				"Namespace /gone-ns": applied(vr, "Namespace", "", "gone-ns", nil),
			}
			if mutate != nil {
				mutate(objs["ConfigMap shop/old"], objs["Namespace /gone-ns"])
			}
			return objs
		}
	}
	claimant := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "other", UID: "other"}}
	claimant.Spec.Manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: old\n"
	refused := strings.Replace(planManifest, "name: a", "name: old", 1) + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: elsewhere\n"
	return []planCase{
		{name: "what left the manifest is pruned, but a Namespace", manifest: planManifest, live: leftovers(nil),
			want: []string{"ConfigMap shop/a=InSync", "ConfigMap shop/old=Prune", "Namespace gone-ns=PruneRefused"}},
		{name: "a Namespace is pruned with spec.pruneNamespacesAndCRDs", manifest: planManifest, live: leftovers(nil),
			vr:   func(vr *v1alpha1.VidraResource) { vr.Spec.PruneNamespacesAndCRDs = true },
			want: []string{"ConfigMap shop/a=InSync", "ConfigMap shop/old=Prune", "Namespace gone-ns=Prune"}},
		{name: "spec.prune false releases", manifest: planManifest, live: leftovers(nil),
			vr:   func(vr *v1alpha1.VidraResource) { f := false; vr.Spec.Prune = &f },
			want: []string{"ConfigMap shop/a=InSync", "ConfigMap shop/old=Release", "Namespace gone-ns=Release"}},
		{name: "the prune annotation keeps", manifest: planManifest,
			live: leftovers(func(old, _ *unstructured.Unstructured) {
				a := old.GetAnnotations()
				a[v1alpha1.PrunePolicyAnnotation] = "disabled"
				old.SetAnnotations(a)
			}),
			want: []string{"ConfigMap shop/a=InSync", "ConfigMap shop/old=Keep", "Namespace gone-ns=PruneRefused"}},
		{name: "an object another resource declares is handed over", manifest: planManifest, live: leftovers(nil),
			resources: []*v1alpha1.VidraResource{claimant},
			want:      []string{"ConfigMap shop/a=InSync", "ConfigMap shop/old=HandOver", "Namespace gone-ns=PruneRefused"},
			check: func(t *testing.T, ds []Decision) {
				if ds[1].Heir != "shop/other" {
					t.Errorf("heir %q, want shop/other", ds[1].Heir)
				}
			}},
		{name: "a failing object holds the prune of its kind and name only", manifest: refused,
			live: leftovers(func(old, _ *unstructured.Unstructured) { old.SetLabels(nil) }),
			vr:   func(vr *v1alpha1.VidraResource) { vr.Spec.PruneNamespacesAndCRDs = true },
			want: []string{"ConfigMap shop/old=Conflict", "ConfigMap elsewhere/a=Create", "ConfigMap shop/a=Prune", "Namespace gone-ns=Prune"},
		},
		{name: "a failing object holds the prune it may be, moved", manifest: strings.Replace(planManifest, "name: a", "name: a\n  namespace: elsewhere", 1),
			live: func(vr *v1alpha1.VidraResource) map[string]*unstructured.Unstructured {
				objs := leftovers(nil)(vr)
				objs["ConfigMap elsewhere/a"] = configMapNamed("elsewhere", "a")
				return objs
			},
			want: []string{"ConfigMap elsewhere/a=Conflict", "ConfigMap shop/a=Hold", "ConfigMap shop/old=Prune", "Namespace gone-ns=PruneRefused"},
			check: func(t *testing.T, ds []Decision) {
				if ds[1].Holder != "ConfigMap elsewhere/a" {
					t.Errorf("holder %q, want ConfigMap elsewhere/a", ds[1].Holder)
				}
			}},
		{name: "what is gone or not the resource's is left alone", manifest: planManifest,
			live: func(vr *v1alpha1.VidraResource) map[string]*unstructured.Unstructured {
				return map[string]*unstructured.Unstructured{"ConfigMap shop/old": configMapNamed("shop", "old")}
			},
			want: []string{"ConfigMap shop/a=Create"}},
	}
}

func configMapNamed(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func wantReason(i int, reason string) func(*testing.T, []Decision) {
	return func(t *testing.T, ds []Decision) {
		if ds[i].Err == nil || ds[i].Err.Reason != reason {
			t.Errorf("decision %d: err %v, want reason %s", i, ds[i].Err, reason)
		}
	}
}

func TestPlanDecidesAsTheEngine(t *testing.T) {
	for _, tc := range append(planCases(), planPruneCases()...) {
		t.Run(tc.name, func(t *testing.T) {
			vr := planVR()
			if tc.vr != nil {
				tc.vr(vr)
			}
			live := &planLive{resources: tc.resources, changes: tc.changes}
			if tc.live != nil {
				// Marked by shop/web of UID web, whatever vr became.
				live.objs = tc.live(planVR())
			}
			objs, errs := manifest.Parse(tc.manifest)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			ds, err := Plan(t.Context(), PlanInput{VR: vr, Objects: objs, Namespaced: planScope, Now: time.Unix(0, 0)}, live)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range ds {
				if d.Key != keyOf(d.Object) {
					t.Errorf("decision on %s keyed %s", keyOf(d.Object), d.Key)
				}
				got = append(got, d.Key.String()+"="+string(d.Action))
			}
			if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
				t.Fatalf("decisions %v, want %v", got, tc.want)
			}
			if tc.check != nil {
				tc.check(t, ds)
			}
		})
	}
}

// Where the manifest may have changed since the last apply and live holds
// it all the same, only the apply can tell whether it changes live: Plan
// asks, and nowhere else.
func TestPlanAsksWhetherTheApplyChangesLiveOnlyAfterAManifestChange(t *testing.T) {
	for _, generation := range []int64{1, 2} {
		vr := planVR()
		vr.Generation = generation
		vr.Status.ManagedResources = vr.Status.ManagedResources[:1]
		live := &planLive{objs: map[string]*unstructured.Unstructured{"ConfigMap shop/a": applied(vr, "ConfigMap", "shop", "a", map[string]any{"k": "v", "x": "1"})}}
		objs, _ := manifest.Parse(planManifest)
		ds, err := Plan(t.Context(), PlanInput{VR: vr, Objects: objs, Namespaced: planScope}, live)
		if err != nil {
			t.Fatal(err)
		}
		if ds[0].Action != PlanInSync || live.asked != (generation == 2) {
			t.Errorf("generation %d: %s, asked %v; want InSync, asked only after a change", generation, ds[0].Action, live.asked)
		}
	}
}

// Every action decide can end on has a name of Plan's, the one the
// preview switches on; only the reads, which Plan performs and then
// decides again, have none.
func TestEveryDecisionHasAPlanAction(t *testing.T) {
	for k := range actionKind(len(actionNames)) {
		var got Action
		if int(k) < len(planActions) {
			got = planActions[k]
		}
		reads := k == actRead || k == actReadWhole
		switch {
		case reads && got != "":
			t.Errorf("%v is a read, which Plan performs, yet names the action %q", k, got)
		case !reads && got != Action(k.String()):
			t.Errorf("%v reaches Plan as %q, want %q", k, got, k.String())
		}
	}
}

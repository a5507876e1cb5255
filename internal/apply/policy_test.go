// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func TestParsePointer(t *testing.T) {
	tests := []struct {
		in      string
		want    pointer
		wantErr bool
	}{
		{in: "/spec/replicas", want: pointer{"spec", "replicas"}},
		{in: "/metadata/annotations/sidecar.istio.io~1status", want: pointer{"metadata", "annotations", "sidecar.istio.io/status"}},
		{in: "/a~0b", want: pointer{"a~b"}},
		{in: "/", want: pointer{""}},
		{in: "spec/replicas", wantErr: true},
		{in: "/a~2", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parsePointer(tt.in)
		if (err != nil) != tt.wantErr || (!tt.wantErr && !reflect.DeepEqual(got, tt.want)) {
			t.Errorf("parsePointer(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err == nil && got.String() != tt.in {
			t.Errorf("pointer %q does not round-trip: %q", tt.in, got.String())
		}
	}
}

func TestCompileIgnoreRefusesIdentityAndMarks(t *testing.T) {
	rules := []v1alpha1.IgnoreRule{
		{Paths: []string{"/spec/replicas", "/metadata/name", "/metadata/labels", "/metadata/labels/app.kubernetes.io~1managed-by", "/kind", "/metadata", "/metadata/labels/team"}},
		{Target: v1alpha1.IgnoreTarget{LabelSelector: "app in (a"}, Paths: []string{"/data"}},
		{Paths: []string{"no-slash"}},
	}
	got, errs := compileIgnore(rules)
	var msgs []string
	for _, err := range errs {
		msgs = append(msgs, err.Error())
	}
	wantPrefixes := []string{
		"spec.ignore[0].paths[1]: /metadata/name holds the object's identity",
		"spec.ignore[0].paths[2]: /metadata/labels holds",
		"spec.ignore[0].paths[3]: /metadata/labels/app.kubernetes.io~1managed-by holds",
		"spec.ignore[0].paths[4]: /kind holds",
		"spec.ignore[0].paths[5]: /metadata holds",
		"spec.ignore[1].target.labelSelector: ",
		`spec.ignore[2].paths[0]: "no-slash" is not a JSON pointer`,
	}
	if len(msgs) != len(wantPrefixes) {
		t.Fatalf("errors:\n%s", strings.Join(msgs, "\n"))
	}
	for i, w := range wantPrefixes {
		if !strings.HasPrefix(msgs[i], w) {
			t.Errorf("error %d = %q, want prefix %q", i, msgs[i], w)
		}
	}
	var allowed []pointer
	if len(got.rules) > 0 {
		for _, id := range got.rules[0].ids {
			allowed = append(allowed, got.paths[id])
		}
	}
	if !reflect.DeepEqual(allowed, []pointer{{"spec", "replicas"}, {"metadata", "labels", "team"}}) {
		t.Errorf("allowed paths = %v", allowed)
	}
}

func obj(y map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: y} }

func deployment() *unstructured.Unstructured {
	return obj(map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "labels": map[string]any{"app": "web"}},
		"spec": map[string]any{
			"replicas": int64(3),
			"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "web", "image": "web:1"},
			}}},
		},
	})
}

func TestIgnoreRulesSelectByTarget(t *testing.T) {
	rules, errs := compileIgnore([]v1alpha1.IgnoreRule{
		{Target: v1alpha1.IgnoreTarget{Kind: "Deployment", Name: "web"}, Paths: []string{"/spec/replicas"}},
		{Target: v1alpha1.IgnoreTarget{Group: "apps", Namespace: "other"}, Paths: []string{"/a"}},
		{Target: v1alpha1.IgnoreTarget{LabelSelector: "app=web"}, Paths: []string{"/b"}},
		{Target: v1alpha1.IgnoreTarget{LabelSelector: "app=db"}, Paths: []string{"/c"}},
		{Paths: []string{"/d"}},
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got := rules.strip(deployment()).paths()
	want := []pointer{{"spec", "replicas"}, {"b"}, {"d"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("paths = %v, want %v", got, want)
	}
}

// paths returns the pointers the rules give the object.
func (ig ignored) paths() []pointer {
	var out []pointer
	for id, ok := range ig.sel {
		if ok {
			out = append(out, ig.rules.paths[id])
		}
	}
	return out
}

// stripIgnored removes paths from obj as rules naming them for every
// object would.
func stripIgnored(obj *unstructured.Unstructured, paths []pointer) ignored {
	rs := &ignoreRules{}
	r := ignoreRule{selector: labels.Everything()}
	for _, p := range paths {
		r.ids = append(r.ids, rs.add(p))
	}
	rs.rules = []ignoreRule{r}
	return rs.strip(obj)
}

// Rules naming a pointer more than once, or pointers deeper than
// maxPointerTokens, cost nothing more per object: the same pointer is
// looked for once, and one too deep is refused.
func TestCompileIgnoreKeepsEachPointerOnceAndRefusesDeepOnes(t *testing.T) {
	deep := "/spec" + strings.Repeat("/0", maxPointerTokens)
	rules, errs := compileIgnore([]v1alpha1.IgnoreRule{
		{Paths: []string{"/spec/replicas", "/spec/replicas", "/spec/paused"}},
		{Target: v1alpha1.IgnoreTarget{Kind: "Deployment"}, Paths: []string{"/spec/paused", "/spec/replicas", deep}},
	})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "spec.ignore[1].paths[2]: the pointer is 33 steps deep, more than 32") {
		t.Errorf("errors = %v, want one for the pointer 33 steps deep", errs)
	}
	if got, want := rules.strip(deployment()).paths(), []pointer{{"spec", "replicas"}, {"spec", "paused"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("paths = %v, want %v", got, want)
	}
	if _, errs := compileIgnore([]v1alpha1.IgnoreRule{{Paths: []string{"/spec" + strings.Repeat("/0", maxPointerTokens-1)}}}); len(errs) > 0 {
		t.Errorf("a pointer %d steps deep was refused: %v", maxPointerTokens, errs)
	}
}

// A list item is named by its position as RFC 6901 writes it: "00" and "+0"
// name nothing, wherever they are looked up, rather than item 0 in some
// places and nothing in others.
func TestIgnoredListPositionsAreCanonical(t *testing.T) {
	for _, tok := range []string{"00", "+0", "-0", "01"} {
		d := deployment()
		ig := stripIgnored(d, []pointer{{"spec", "template", "spec", "containers", tok, "image"}})
		if len(ig.seeds) != 0 {
			t.Errorf("%q named a list item: seeds %v", tok, ig.seeds)
		}
		if _, ok := step([]any{"a", "b"}, tok); ok {
			t.Errorf("step(%q) found an item", tok)
		}
		if _, ok := liveAt(d.Object, d.Object, pointer{"spec", "template", "spec", "containers", tok, "image"}); ok {
			t.Errorf("liveAt(%q) found the field", tok)
		}
	}
	d := deployment()
	if ig := stripIgnored(d, []pointer{{"spec", "template", "spec", "containers", "0", "image"}}); len(ig.seeds) != 1 {
		t.Errorf("\"0\" named nothing: seeds %v", ig.seeds)
	}
}

// One walk of the object removes every field named: a field together with
// the fields below it, a map's key but never a list item, whose fields are
// still looked for.
func TestStripIgnoredWalksTheObjectOnce(t *testing.T) {
	d := deployment()
	d.Object["spec"].(map[string]any)["strategy"] = map[string]any{"type": "Recreate"}
	ig := stripIgnored(d, []pointer{
		{"spec", "strategy", "type"}, {"spec", "strategy"},
		{"spec", "template", "spec", "containers", "0"}, {"spec", "template", "spec", "containers", "0", "image"},
		{"spec", "absent", "x"}, {"metadata", "labels", "app"},
	})
	var seeded []string
	for _, s := range ig.seeds {
		seeded = append(seeded, s.path.String())
	}
	if want := []string{"/spec/strategy", "/spec/template/spec/containers/0/image", "/metadata/labels/app"}; !reflect.DeepEqual(seeded, want) {
		t.Errorf("seeds %v, want %v in the order of the pointers", seeded, want)
	}
	if _, ok := lookup(d.Object, pointer{"spec", "strategy"}); ok {
		t.Error("/spec/strategy stayed")
	}
	if c, ok := lookup(d.Object, pointer{"spec", "template", "spec", "containers", "0"}); !ok || c.(map[string]any)["name"] != "web" || c.(map[string]any)["image"] != nil {
		t.Errorf("container = %v, want the list item kept without its image", c)
	}
	if len(ig.paths()) != 6 {
		t.Errorf("paths = %v, want all six", ig.paths())
	}
}

// BenchmarkStripIgnoredHostile strips what a tenant's spec.ignore can name
// at most, 64 rules of 32 pointers 32 steps deep, from 1,000 objects that
// hold their parents: one walk of the tree per object, about 20 ms, where a
// walk per pointer took 8.2 s.
func BenchmarkStripIgnoredHostile(b *testing.B) {
	var m strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&m, "---\napiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t%d}\nspec:\n  %sx\n", i, strings.Repeat("- ", maxPointerTokens-1))
	}
	objs, errs := manifest.Parse(m.String())
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	var spec []v1alpha1.IgnoreRule
	for i := range 64 {
		r := v1alpha1.IgnoreRule{Target: v1alpha1.IgnoreTarget{LabelSelector: fmt.Sprintf("x!=%d", i)}}
		for j := range 32 {
			r.Paths = append(r.Paths, "/spec"+strings.Repeat("/0", maxPointerTokens-2)+fmt.Sprintf("/%d", i*32+j))
		}
		spec = append(spec, r)
	}
	rules, cerrs := compileIgnore(spec)
	if len(cerrs) > 0 {
		b.Fatal(cerrs)
	}
	b.ResetTimer()
	for range b.N {
		for _, o := range objs {
			rules.strip(&unstructured.Unstructured{Object: o.Object.Object})
		}
	}
}

func TestIgnoredFieldsAreSeededThenTakenFromLive(t *testing.T) {
	d := deployment()
	ig := stripIgnored(d, []pointer{{"spec", "replicas"}, {"spec", "template", "spec", "containers", "0", "image"}, {"spec", "paused"}})
	if _, ok := d.Object["spec"].(map[string]any)["replicas"]; ok {
		t.Fatal("replicas not removed from the object to apply")
	}
	if len(ig.seeds) != 2 {
		t.Fatalf("seeds = %v, want replicas and image (paused is not in the manifest)", ig.seeds)
	}

	created := d.DeepCopy().Object
	if ig.withIgnored(created, d.Object, nil) {
		t.Error("a creation took values from live")
	}
	if v, _ := lookup(created, pointer{"spec", "replicas"}); v != int64(3) {
		t.Errorf("created with replicas %v, want the manifest's 3", v)
	}

	// A sidecar injected before the container: the image is found by name.
	live := deployment()
	live.Object["spec"].(map[string]any)["replicas"] = int64(7)
	live.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"] = []any{
		map[string]any{"name": "proxy", "image": "proxy:9"},
		map[string]any{"name": "web", "image": "web:2"},
	}
	updated := d.DeepCopy().Object
	if !ig.withIgnored(updated, d.Object, live) {
		t.Error("an update did not take values from live")
	}
	if v, _ := lookup(updated, pointer{"spec", "replicas"}); v != int64(7) {
		t.Errorf("replicas = %v, want live's 7", v)
	}
	if v, _ := lookup(updated, pointer{"spec", "template", "spec", "containers", "0", "image"}); v != "web:2" {
		t.Errorf("image = %v, want the live web container's web:2", v)
	}
}

func TestHandEditsOfIgnoredFieldsDoNotCount(t *testing.T) {
	d := deployment()
	p := &planned{obj: d}
	p.ig = stripIgnored(d, []pointer{{"spec", "replicas"}, {"spec", "template", "spec", "containers", "0", "image"}})
	entries := []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-scale", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:metadata":{"f:labels":{"f:team":{}}},"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:image":{}}}}}}}`)}},
	}
	h := parseHandEdits(entries, []string{"kubectl-scale", "kubectl-edit"}, p.notIgnored)
	if got := h.managers(); !reflect.DeepEqual(got, []string{"kubectl-edit"}) {
		t.Errorf("managers = %v, want only kubectl-edit: kubectl-scale changed an ignored field only", got)
	}
	want := &fieldpath.Set{}
	want.Insert(fieldpath.MakePathOrDie("metadata", "labels", "team"))
	if !h.fields.Leaves().Equals(want) {
		t.Errorf("hand-edited fields = %v, want only the label", h.fields.Leaves())
	}

	// Taking the fields over leaves the ignored ones with their writer.
	taken, ok := managedFieldsTakenOver(entries, []string{"kubectl-scale", "kubectl-edit"}, p.notIgnored, "vidra", "apps/v1", metav1.Now())
	if !ok {
		t.Fatal("nothing taken over")
	}
	var managers []string
	for _, e := range taken {
		managers = append(managers, e.Manager+":"+string(e.FieldsV1.Raw))
	}
	joined := strings.Join(managers, " ")
	if !strings.Contains(joined, `kubectl-scale:{"f:spec":{"f:replicas":{}}}`) || !strings.Contains(joined, `kubectl-edit:{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:image":{}}}}}}}`) ||
		!strings.Contains(joined, `vidra:{"f:metadata":{"f:labels":{"f:team":{}}}}`) {
		t.Errorf("entries after the take-over: %s", joined)
	}
}

// A list item as a whole cannot be handed over: strip keeps it in the
// object applied, so a pointer that ends at one hides no hand edit of its
// fields, such as a container made privileged.
func TestHandEditsBelowAnIgnoredListItemCount(t *testing.T) {
	d := deployment()
	p := &planned{obj: d}
	p.ig = stripIgnored(d, []pointer{{"spec", "template", "spec", "containers", "0"}})
	entries := []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:securityContext":{".":{},"f:privileged":{}}}}}}}}`)}},
	}
	overrides := []string{"kubectl-edit"}
	privileged := fieldpath.MakePathOrDie("spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "web"), "securityContext", "privileged")
	h := parseHandEdits(entries, overrides, p.notIgnored)
	if got := h.managers(); !reflect.DeepEqual(got, overrides) || !h.fields.Has(privileged) {
		t.Errorf("managers %v, fields\n%v\nwant kubectl-edit's securityContext.privileged", got, h.fields)
	}
	if d := driftOf(p, deployment(), h, time.Now()); !slices.Contains(d.Fields, "/spec/template/spec/containers/0/securityContext/privileged") {
		t.Errorf("drift fields %v, want the privileged flag", d.Fields)
	}
	taken, ok := managedFieldsTakenOver(entries, overrides, p.notIgnored, "vidra", "apps/v1", metav1.Now())
	if !ok || len(taken) != 1 || taken[0].Manager != "vidra" {
		t.Fatalf("entries after the take-over %v, ok %v: want Vidra's alone", taken, ok)
	}
	if set, err := parseFieldsV1(taken[0].FieldsV1); err != nil || !set.Has(privileged) {
		t.Errorf("Vidra's entry owns %v (%v), want the privileged flag", set, err)
	}
}

func TestDriftOfNamesFieldsAndManager(t *testing.T) {
	d := deployment()
	p := &planned{obj: d}
	live := deployment()
	live.Object["spec"].(map[string]any)["replicas"] = int64(5)
	live.Object["metadata"].(map[string]any)["labels"].(map[string]any)["team"] = "x"
	at := metav1.Now()
	live.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "vidra", Operation: metav1.ManagedFieldsOperationApply, Time: &at},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, Time: &at, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:team":{}}},"f:spec":{"f:replicas":{}}}`)}},
	})
	h := parseHandEdits(live.GetManagedFields(), []string{"kubectl-edit"}, nil)
	r := driftOf(p, live, h, at.Time)
	if !reflect.DeepEqual(r.Fields, []string{"/spec/replicas", "/metadata/labels/team"}) || r.Manager != "kubectl-edit" || r.Deleted {
		t.Errorf("drift = %+v", r)
	}
	if got := DescribeDrift(r); got != "Deployment.apps shop/web (/spec/replicas, /metadata/labels/team by kubectl-edit)" {
		t.Errorf("DescribeDrift = %q", got)
	}
	gone := driftOf(p, nil, handEdits{}, at.Time)
	if !gone.Deleted || DescribeDrift(gone) != "Deployment.apps shop/web (deleted)" {
		t.Errorf("deleted drift = %+v", gone)
	}
}

// A remote destination's API server names the field managers of its objects
// as it likes: a name of 512 KiB once became a drift record of 547 KB in the
// status. A record names at most 128 bytes of it, as many as an API server
// accepts, and so does the Conflict condition the writer is named in.
func TestDriftNamesAManagerIn128BytesAtMost(t *testing.T) {
	at := metav1.Now()
	for _, name := range []string{strings.Repeat("m", 1<<20), strings.Repeat("é", 1<<19)} {
		for _, owns := range []bool{true, false} {
			p := &planned{obj: deployment()}
			live := deployment()
			live.Object["spec"].(map[string]any)["replicas"] = int64(5)
			entry := metav1.ManagedFieldsEntry{Manager: name, Operation: metav1.ManagedFieldsOperationUpdate, Time: &at}
			if owns {
				// The manager owns the drifted field; else it is only the
				// last writer.
				entry.FieldsV1 = &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}
			}
			live.SetManagedFields([]metav1.ManagedFieldsEntry{entry})
			r := driftOf(p, live, parseHandEdits(live.GetManagedFields(), []string{name}, nil), at.Time)
			for what, got := range map[string]string{"drift record": r.Manager, "last writer": lastWriter(live)} {
				if len(got) > maxManager || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || !strings.HasPrefix(name, strings.TrimSuffix(got, "…")) {
					t.Errorf("%s names a manager of %d bytes (valid UTF-8 %v): %q", what, len(got), utf8.ValidString(got), got[:min(len(got), 16)])
				}
			}
			if b, _ := json.Marshal(r); len(b) > 512 {
				t.Errorf("a drift record of one field is %d bytes as JSON", len(b))
			}
		}
	}
}

func TestDiffPointersWalksListsOfEqualLength(t *testing.T) {
	desired := deployment().Object
	live := deployment().Object
	live["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "web:2"
	live["spec"].(map[string]any)["extra"] = "not in the manifest"
	var got []string
	diffPointers(desired, live, nil, &got)
	if want := []string{"/spec/template/spec/containers/0/image"}; !reflect.DeepEqual(got, want) {
		t.Errorf("diffPointers = %v, want %v", got, want)
	}
}

func TestPointerOfUsesTheManifestsPositions(t *testing.T) {
	desired := deployment().Object
	live := deployment().Object
	live["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"] = []any{
		map[string]any{"name": "proxy"}, map[string]any{"name": "web", "env": []any{map[string]any{"name": "A"}}},
	}
	fp := fieldpath.MakePathOrDie("spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "web"), "env", fieldpath.KeyByFields("name", "A"))
	got, ok := pointerOf(desired, live, fp)
	if !ok || got.String() != "/spec/template/spec/containers/0/env/0" {
		t.Errorf("pointerOf = %v, %v", got, ok)
	}
}

func TestLabelSetsAreBounded(t *testing.T) {
	m := labelSet{max: maxManagerLabels}
	for i := range maxManagerLabels {
		m.label(strings.Repeat("m", i+1))
	}
	if got := m.label("one-too-many"); got != "other" {
		t.Errorf("label = %q, want other", got)
	}
	if got := m.label("m"); got != "m" {
		t.Errorf("a known manager lost its label: %q", got)
	}
	if got := m.label(""); got != "unknown" {
		t.Errorf("label of no manager = %q", got)
	}
	if got := (&labelSet{max: 1}).label(strings.Repeat("k", maxLabelBytes+1)); got != "other" {
		t.Errorf("a value of %d bytes kept its label: %.20q", maxLabelBytes+1, got)
	}
}

func TestMissingBucketLabelIsNoDrift(t *testing.T) {
	d := deployment()
	p := &planned{obj: mark(d, &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app", UID: "u"}})}
	live := p.obj.DeepCopy()
	labels := live.GetLabels()
	delete(labels, v1alpha1.BucketLabel)
	live.SetLabels(labels)
	if r := driftOf(p, live, handEdits{fields: &fieldpath.Set{}}, metav1.Now().Time); !marksOnly(r) {
		t.Errorf("an object without the bucket label drifted: %+v", r)
	}
	live.Object["spec"].(map[string]any)["replicas"] = int64(9)
	if r := driftOf(p, live, handEdits{fields: &fieldpath.Set{}}, metav1.Now().Time); marksOnly(r) {
		t.Errorf("a changed field passed for a missing mark: %+v", r)
	}
}

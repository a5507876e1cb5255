// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// manyEntries are n managedFields entries of manager, told apart by their
// subresource as a tenant may write them, entry i owning the ConfigMap key
// k<i>.
func manyEntries(manager string, n int) []metav1.ManagedFieldsEntry {
	out := make([]metav1.ManagedFieldsEntry, n)
	for i := range out {
		out[i] = fieldsEntry(manager, fmt.Sprintf(`{"f:data":{"f:k%d":{}}}`, i))
		out[i].Subresource = fmt.Sprintf("s%d", i)
	}
	return out
}

// countingFilter is a keep or take function that drops the fields under
// the paths of excl, and counts its calls.
func countingFilter(calls *int, excl ...fieldpath.Path) func(*fieldpath.Set) *fieldpath.Set {
	ex := fieldpath.NewSet(excl...)
	return func(set *fieldpath.Set) *fieldpath.Set {
		*calls++
		return set.RecursiveDifference(ex)
	}
}

// Thousands of entries of one hand-edit manager cost what their fields
// cost: spec.ignore is asked about them once per manager, not per entry
// (5,000 entries and 2,048 pointers once took seconds a reconcile).
func TestHandEditsAskIgnoreOncePerManager(t *testing.T) {
	entries := append(manyEntries("kubectl-edit", 5000), manyEntries("kubectl-label", 3)...)
	entries = append(entries, fieldsEntry("vidra", `{"f:data":{"f:a":{}}}`))
	overrides := []string{"kubectl-edit", "kubectl-label"}
	// Both managers' k0 are ignored; kubectl-label is left with k1 and k2.
	ignored := fieldpath.MakePathOrDie("data", "k0")

	calls := 0
	h := parseHandEdits(entries, overrides, countingFilter(&calls, ignored))
	if calls > 2 {
		t.Errorf("keep called %d times for 2 managers", calls)
	}
	if got, want := h.managers(), overrides; !slices.Equal(got, want) {
		t.Errorf("managers = %v, want %v", got, want)
	}
	if n := h.fields.Size(); n != 4999 || h.fields.Has(ignored) {
		t.Errorf("%d hand-edited fields, k0 among them: %v; want k1 to k4999", n, h.fields.Has(ignored))
	}

	calls = 0
	got, ok := managedFieldsTakenOver(entries, overrides, countingFilter(&calls, ignored), "vidra", "v1", metav1.Now())
	if calls > 2 {
		t.Errorf("take called %d times for 2 managers", calls)
	}
	if !ok {
		t.Fatal("nothing taken over")
	}
	var kept []string
	for _, e := range got {
		kept = append(kept, e.Manager+"/"+e.Subresource+":"+string(e.FieldsV1.Raw))
	}
	want := []string{`kubectl-edit/s0:{"f:data":{"f:k0":{}}}`, `kubectl-label/s0:{"f:data":{"f:k0":{}}}`}
	if len(kept) != 3 || !slices.Equal(kept[:2], want) {
		t.Errorf("entries after the take-over %.300v, want %v then Vidra's", kept, want)
	} else if set, err := parseFieldsV1(got[2].FieldsV1); err != nil || set.Size() != 5000 {
		t.Errorf("Vidra's entry owns %v fields (%v), want a and k1 to k4999", set.Size(), err)
	}
}

// entryUniverse are the fields the random entries of
// TestHandEditsMatchEntryByEntry own some of.
func entryUniverse() []fieldpath.Path {
	web := fieldpath.KeyByFields("name", "web")
	side := fieldpath.KeyByFields("name", "side")
	containers := []any{"spec", "template", "spec", "containers"}
	return []fieldpath.Path{
		fieldpath.MakePathOrDie("metadata", "labels"),
		fieldpath.MakePathOrDie("metadata", "labels", "a"),
		fieldpath.MakePathOrDie("metadata", "labels", "b"),
		fieldpath.MakePathOrDie("metadata", "labels", "c"),
		fieldpath.MakePathOrDie("metadata", "annotations", "x"),
		fieldpath.MakePathOrDie("spec", "replicas"),
		fieldpath.MakePathOrDie("spec", "paused"),
		fieldpath.MakePathOrDie(append(slices.Clone(containers), web)...),
		fieldpath.MakePathOrDie(append(slices.Clone(containers), web, "image")...),
		fieldpath.MakePathOrDie(append(slices.Clone(containers), web, "securityContext", "privileged")...),
		fieldpath.MakePathOrDie(append(slices.Clone(containers), side)...),
		fieldpath.MakePathOrDie(append(slices.Clone(containers), side, "image")...),
		fieldpath.MakePathOrDie("data", "k0"),
		fieldpath.MakePathOrDie("data", "k1"),
	}
}

// randomEntry is a managedFields entry of one of managers, drawn with r:
// of a subresource or not, an Apply or an Update, owning some of universe,
// or no fields, or fields that do not parse.
func randomEntry(t *testing.T, r *rand.Rand, managers []string, universe []fieldpath.Path) metav1.ManagedFieldsEntry {
	e := fieldsEntry(managers[r.IntN(len(managers))], "")
	e.Time = &metav1.Time{Time: time.Unix(r.Int64N(1e9), 0)}
	switch r.IntN(4) {
	case 0:
		e.Subresource = "status"
	case 1:
		e.Operation = metav1.ManagedFieldsOperationApply
	}
	switch n := r.IntN(20); {
	case n == 0:
	case n == 1:
		e.FieldsV1 = &metav1.FieldsV1{Raw: []byte(`{"f:data":`)}
	case n == 2:
		e.FieldsV1 = &metav1.FieldsV1{Raw: []byte(`{}`)}
	default:
		set := &fieldpath.Set{}
		for _, fp := range universe {
			if r.IntN(4) == 0 {
				set.Insert(fp)
			}
		}
		raw, err := set.ToJSON()
		if err != nil {
			t.Fatal(err)
		}
		e.FieldsV1 = &metav1.FieldsV1{Raw: raw}
	}
	return e
}

// The sets of each manager are merged before spec.ignore trims them: the
// result is the one of trimming each entry alone, managers in order of
// their first entry that counts, entries without readable fields included.
func TestHandEditsMatchEntryByEntry(t *testing.T) {
	d := &unstructured.Unstructured{Object: object(t, `{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": {"name": "web", "labels": {"a": "1", "b": "2"}},
		"spec": {"replicas": 3, "template": {"spec": {"containers": [
			{"name": "web", "image": "web:1"}, {"name": "side", "image": "side:1"}]}}},
		"data": {"k0": "x"}
	}`)}
	p := &planned{obj: d}
	p.ig = stripIgnored(d, []pointer{
		{"spec", "replicas"}, {"spec", "template", "spec", "containers", "0", "image"},
		{"spec", "template", "spec", "containers", "1"}, {"metadata", "labels", "b"}, {"data"},
	})
	filter := fieldpath.NewSet(fieldpath.MakePathOrDie("metadata", "labels"), fieldpath.MakePathOrDie("spec", "template", "spec"))
	filters := []struct {
		name string
		f    func(*fieldpath.Set) *fieldpath.Set
	}{
		{"none", nil},
		{"a filter", func(s *fieldpath.Set) *fieldpath.Set { return s.RecursiveDifference(filter) }},
		{"spec.ignore", p.notIgnored},
		{"everything", func(*fieldpath.Set) *fieldpath.Set { return &fieldpath.Set{} }},
	}
	universe := entryUniverse()
	managers := []string{"kubectl-edit", "kubectl-label", "kubectl-patch", "vidra", "kube-controller-manager"}
	overrides := managers[:3]
	r := rand.New(rand.NewPCG(7, 11))
	now := metav1.NewTime(time.Unix(2e9, 0))
	for _, tf := range filters {
		f := tf.f
		t.Run(tf.name, func(t *testing.T) {
			for range 500 {
				entries := make([]metav1.ManagedFieldsEntry, r.IntN(12))
				for i := range entries {
					entries[i] = randomEntry(t, r, managers, universe)
				}
				want, got := parseHandEditsEntryByEntry(entries, overrides, f), parseHandEdits(entries, overrides, f)
				if !slices.Equal(got.names, want.names) || got.unparsed != want.unparsed || !got.fields.Equals(want.fields) {
					t.Fatalf("hand edits of %s:\ngot managers %v, unparsed %v, fields\n%v\nwant %v, %v,\n%v",
						describeEntries(entries), got.names, got.unparsed, got.fields, want.names, want.unparsed, want.fields)
				}
				wantEntries, wantOK := managedFieldsTakenOverEntryByEntry(entries, overrides, f, "vidra", "v1", now)
				gotEntries, gotOK := managedFieldsTakenOver(entries, overrides, f, "vidra", "v1", now)
				if diff := cmp.Diff(wantEntries, gotEntries); diff != "" || gotOK != wantOK {
					t.Fatalf("take-over of %s, ok %v, want %v (-want +got):\n%s", describeEntries(entries), gotOK, wantOK, diff)
				}
			}
		})
	}
}

func describeEntries(entries []metav1.ManagedFieldsEntry) string {
	s := ""
	for _, e := range entries {
		raw := "nil"
		if e.FieldsV1 != nil {
			raw = string(e.FieldsV1.Raw)
		}
		s += fmt.Sprintf("\n  %s %s %q %s", e.Manager, e.Operation, e.Subresource, raw)
	}
	return s
}

// parseHandEditsEntryByEntry is parseHandEdits as it reads, one entry at a
// time.
func parseHandEditsEntryByEntry(entries []metav1.ManagedFieldsEntry, overrides []string, keep func(*fieldpath.Set) *fieldpath.Set) handEdits {
	h := handEdits{fields: &fieldpath.Set{}}
	for _, e := range entries {
		if !slices.Contains(overrides, e.Manager) {
			continue
		}
		var set *fieldpath.Set
		if e.FieldsV1 != nil {
			var err error
			if set, err = parseFieldsV1(e.FieldsV1); err != nil {
				h.unparsed = true
				set = nil
			} else if keep != nil {
				if set = keep(set); set.Empty() {
					continue
				}
			}
		}
		if !slices.Contains(h.names, e.Manager) {
			h.names = append(h.names, e.Manager)
		}
		if set != nil {
			h.fields = h.fields.Union(set)
		}
	}
	return h
}

// managedFieldsTakenOverEntryByEntry is managedFieldsTakenOver as it
// reads, one entry at a time.
func managedFieldsTakenOverEntryByEntry(entries []metav1.ManagedFieldsEntry, overrides []string, take func(*fieldpath.Set) *fieldpath.Set, manager, apiVersion string, now metav1.Time) ([]metav1.ManagedFieldsEntry, bool) {
	taken := &fieldpath.Set{}
	found := false
	keep := make([]metav1.ManagedFieldsEntry, 0, len(entries)+1)
	at := -1
	for _, e := range entries {
		if slices.Contains(overrides, e.Manager) {
			found = true
			if e.FieldsV1 != nil {
				if set, err := parseFieldsV1(e.FieldsV1); err == nil {
					mine := set
					if take != nil {
						mine = take(set)
					}
					taken = taken.Union(mine)
					if rest := set.Difference(mine); !rest.Empty() {
						if raw, err := rest.ToJSON(); err == nil {
							e.FieldsV1 = &metav1.FieldsV1{Raw: raw}
							keep = append(keep, e)
						}
					}
				}
			}
			continue
		}
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			at = len(keep)
		}
		keep = append(keep, e)
	}
	if !found {
		return entries, false
	}
	if at < 0 {
		keep = append(keep, metav1.ManagedFieldsEntry{
			Manager: manager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: apiVersion,
			FieldsType: "FieldsV1",
		})
		at = len(keep) - 1
	}
	if f := keep[at].FieldsV1; f != nil {
		if own, err := parseFieldsV1(f); err == nil {
			taken = own.Union(taken)
		}
	}
	raw, err := taken.ToJSON()
	if err != nil {
		return entries, false
	}
	keep[at].Time = &now
	keep[at].FieldsV1 = &metav1.FieldsV1{Raw: raw}
	return keep, true
}

// BenchmarkHandEditsOfManyEntries reads, then takes back, the hand edits
// of 8,000 entries of one manager, each owning one key of a ConfigMap,
// under spec.ignore's 2,048 pointers at most.
func BenchmarkHandEditsOfManyEntries(b *testing.B) {
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "settings"},
		"data": map[string]any{"a": "1"},
	}}
	var ptrs []pointer
	for i := range 2048 {
		ptrs = append(ptrs, pointer{"data", fmt.Sprintf("ign%d", i)})
	}
	p := &planned{obj: cm}
	p.ig = stripIgnored(cm, ptrs)
	live := &unstructured.Unstructured{Object: map[string]any{}}
	live.SetManagedFields(append(manyEntries("kubectl-edit", 8000), fieldsEntry("vidra", `{"f:data":{"f:a":{}}}`)))
	overrides := []string{"kubectl-edit"}
	now := metav1.Now()
	for b.Loop() {
		entries := live.GetManagedFields()
		if h := parseHandEdits(entries, overrides, p.notIgnored); len(h.managers()) != 1 || h.coveredBy(cm.Object) {
			b.Fatalf("hand edits of %v", h.managers())
		}
		if _, ok := managedFieldsTakenOver(entries, overrides, p.notIgnored, "vidra", "v1", now); !ok {
			b.Fatal("nothing taken over")
		}
	}
}

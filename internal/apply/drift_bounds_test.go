// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func ptrTo(s string) *string { return &s }

// leavesNotIn appends the paths of the leaves of set that node does not
// have, as eachLeafNotIn finds them.
func leavesNotIn(set *fieldpath.Set, node any, at fieldpath.Path, out *[]fieldpath.Path, lists *listLookups) {
	eachLeafNotIn(set, node, at, lists, func(p fieldpath.Path) bool {
		*out = append(*out, slices.Clone(p))
		return true
	})
}

// deepWide returns a map nested depth levels under key "a", with keys
// k0…k(n-1) at the bottom, and the path of that bottom.
func deepWide(depth, n int) (map[string]any, fieldpath.Path) {
	bottom := map[string]any{}
	for i := range n {
		bottom[fmt.Sprintf("k%d", i)] = int64(i)
	}
	var at fieldpath.Path
	m := bottom
	for range depth {
		m = map[string]any{"a": m}
		at = append(at, fieldpath.PathElement{FieldName: ptrTo("a")})
	}
	return m, at
}

func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The drift of an object a thousand levels deep with thousands of keys
// costs its size, not its depth times its keys: a path per key used to be
// copied (160 MB here, a gigabyte at the depth the parser allows).
func TestDriftOfADeepWideObjectCostsItsSize(t *testing.T) {
	spec, _ := deepWide(500, 20000)
	desired := map[string]any{"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "x"}, "spec": spec}
	live := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "x"}, "spec": spec}}
	var r v1alpha1.DriftRecord
	if alloc := allocated(func() {
		r = driftOf(&planned{obj: &unstructured.Unstructured{Object: desired}}, live, handEdits{fields: &fieldpath.Set{}}, time.Now())
	}); alloc > 16<<20 {
		t.Errorf("the drift of an object in sync allocated %d MiB, want under 16", alloc>>20)
	}
	if len(r.Fields) != 0 {
		t.Errorf("drift %v of an object in sync", r.Fields)
	}
}

// A hand edit of thousands of fields a thousand levels deep is listed up to
// what a drift record holds, from a bounded number of its leaves: each
// path was copied and all were held, a gigabyte at the depth the parser
// allows; and leaves that deep all read as one cut pointer, which never
// filled the record.
func TestDriftOfADeepWideHandEditStopsAtTheRecordsSize(t *testing.T) {
	spec, at := deepWide(400, 5000)
	live := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "x"}, "spec": spec}}
	desired := map[string]any{"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "x"}}
	set := &fieldpath.Set{}
	specAt := append(fieldpath.MakePathOrDie("spec"), at...)
	for i := range 5000 {
		set.Insert(append(slices.Clip(specAt), fieldpath.PathElement{FieldName: ptrTo(fmt.Sprintf("k%d", i))}))
	}
	h := handEdits{names: []string{"kubectl-edit"}, fields: set}
	var r v1alpha1.DriftRecord
	if alloc := allocated(func() { r = driftOf(&planned{obj: &unstructured.Unstructured{Object: desired}}, live, h, time.Now()) }); alloc > 16<<20 {
		t.Errorf("the drift of a deep, wide hand edit allocated %d MiB, want under 16", alloc>>20)
	}
	// Every field's pointer is cut to the same maxPointer bytes: one field,
	// and "…" for those not looked at.
	if len(r.Fields) != 2 || r.Fields[1] != "…" {
		t.Errorf("drift of %d fields %q; want one, then \"…\"", len(r.Fields), r.Fields)
	}
}

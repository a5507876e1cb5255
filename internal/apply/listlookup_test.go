// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// lookThrough is how pathIn found a list's element before listLookups:
// the first element, in the set's order, whose key fields, value or
// position match the item.
func lookThrough(set *fieldpath.Set, item any, i int, last bool) (fieldpath.PathElement, bool) {
	l := newListLookups()
	l.kinds[set] = listKinds{}
	return l.find(set, item, i, last)
}

// Built and looked up, an element is the one a look through the list
// finds, for keyed lists (one key field or two, numbers among them), lists
// of values and lists by position, and none is found for an item the set
// does not hold.
func TestListLookupsFindWhatALookThroughFinds(t *testing.T) {
	type list struct {
		name  string
		items []any
		set   *fieldpath.Set
	}
	var lists []list
	keyed := list{name: "keyed by name"}
	ports := list{name: "keyed by port and protocol"}
	values := list{name: "values"}
	atomic := list{name: "positions"}
	keyed.set, ports.set, values.set, atomic.set = &fieldpath.Set{}, &fieldpath.Set{}, &fieldpath.Set{}, &fieldpath.Set{}
	for i := range 50 {
		keyed.items = append(keyed.items, map[string]any{"name": fmt.Sprintf("c%d", i), "image": "x"})
		ports.items = append(ports.items, map[string]any{"containerPort": int64(8000 + i), "protocol": "TCP"})
		values.items = append(values.items, []any{fmt.Sprintf("v%d", i), int64(i), 1.5 + float64(i)}[i%3])
		atomic.items = append(atomic.items, map[string]any{"a": int64(i)})
		if i%7 == 3 {
			continue // not in the set
		}
		keyed.set.Insert(fieldpath.MakePathOrDie(fieldpath.KeyByFields("name", fmt.Sprintf("c%d", i)), "image"))
		ports.set.Insert(fieldpath.MakePathOrDie(fieldpath.KeyByFields("containerPort", int64(8000+i), "protocol", "TCP"), "protocol"))
		v := value.NewValueInterface(values.items[i])
		values.set.Insert(fieldpath.MakePathOrDie(fieldpath.PathElement{Value: &v}))
		atomic.set.Insert(fieldpath.MakePathOrDie(i, "a"))
	}
	lists = append(lists, keyed, ports, values, atomic)
	for _, l := range lists {
		lookups := newListLookups()
		for i, item := range l.items {
			got, gotOK := lookups.find(l.set, item, i, true)
			want, wantOK := lookThrough(l.set, item, i, true)
			if gotOK != wantOK || (gotOK && !got.Equals(want)) {
				t.Errorf("%s, item %d: found %v (%v), a look-through %v (%v)", l.name, i, got, gotOK, want, wantOK)
			}
			if wantOK == (i%7 == 3) {
				t.Errorf("%s, item %d: found %v, want it only when the set holds it", l.name, i, wantOK)
			}
		}
		if lookups.budget != maxListScan-countElements(l.set)*missing(len(l.items)) {
			t.Errorf("%s: looked through %d elements, want only for the items the set lacks", l.name, maxListScan-lookups.budget)
		}
	}
}

func countElements(set *fieldpath.Set) int { return set.Children.Size() + set.Members.Size() }

// missing counts the items of 0..n-1 the test leaves out of its sets.
func missing(n int) int {
	m := 0
	for i := range n {
		if i%7 == 3 {
			m++
		}
	}
	return m
}

// A list of 2,000 items a hand-edit manager owns, and 2,048 pointers into
// it: each pointer's element is built and looked up, never looked for
// through the whole list.
func TestHandEditsOfIgnoredFieldsAreLookedUp(t *testing.T) {
	obj, set, ig := handEditsOfIgnoredFields(t, 2000)
	lists := newListLookups()
	excl := 0
	for id, ok := range ig.sel {
		if !ok {
			continue
		}
		if _, found := pathIn(set, obj.Object, ig.rules.paths[id], lists); found {
			excl++
		}
	}
	if excl != 2000 {
		t.Errorf("%d pointers found in the field set, want the 2,000 of its items", excl)
	}
	// The 48 pointers past the list's end name no item at all.
	if n := lookedThrough(lists); n != 0 {
		t.Errorf("looked through %d elements, want none", n)
	}
	if got := without(set, obj.Object, ig); got.Size() != 0 {
		t.Errorf("%d hand-edited fields left, want none: each is ignored", got.Size())
	}
}

func lookedThrough(l *listLookups) int { return maxListScan - l.budget }

// handEditsOfIgnoredFields is an object with a list of n items, the field
// set a hand-edit manager owns of it (a field of each item) and the
// ignore rules of 2,048 pointers to those fields.
func handEditsOfIgnoredFields(tb testing.TB, n int) (*unstructured.Unstructured, *fieldpath.Set, ignored) {
	list := make([]any, n)
	set := &fieldpath.Set{}
	for i := range n {
		name := fmt.Sprintf("i%d", i)
		list[i] = map[string]any{"name": name, "a": "v"}
		set.Insert(fieldpath.MakePathOrDie("spec", "items", fieldpath.KeyByFields("name", name), "a"))
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "t"}, "spec": map[string]any{"items": list}}}
	var paths []string
	for k := range 2048 {
		paths = append(paths, fmt.Sprintf("/spec/items/%d/a", k))
	}
	rules, errs := compileIgnore([]v1alpha1.IgnoreRule{{Paths: paths}})
	if len(errs) > 0 {
		tb.Fatal(errs)
	}
	desired := obj.DeepCopy()
	return desired, set, rules.strip(obj)
}

// BenchmarkHandEditsOfIgnoredFields: 20,000 items, 2,048 pointers. A look
// through the list for each pointer took 2.8 s.
func BenchmarkHandEditsOfIgnoredFields(b *testing.B) {
	obj, set, ig := handEditsOfIgnoredFields(b, 20000)
	b.ResetTimer()
	for range b.N {
		if got := without(set, obj.Object, ig); got.Size() != 20000-2048 {
			b.Fatalf("%d fields left", got.Size())
		}
	}
}

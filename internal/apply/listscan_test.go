// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// The look-throughs the list indexes replace, as they were: each looks for
// an item through the whole list.

func scanDesiredAt(node any, pe fieldpath.PathElement) (any, bool) {
	switch {
	case pe.FieldName != nil:
		m, _ := node.(map[string]any)
		v, ok := m[*pe.FieldName]
		return v, ok && v != nil
	case pe.Key != nil:
		return scanOnlyItem(node, func(item any) bool {
			m, ok := item.(map[string]any)
			return ok && keyMatches(m, *pe.Key)
		})
	case pe.Value != nil:
		return scanOnlyItem(node, func(item any) bool {
			return item != nil && value.Equals(value.NewValueInterface(item), *pe.Value)
		})
	}
	return nil, false
}

func scanOnlyItem(node any, match func(any) bool) (any, bool) {
	list, _ := node.([]any)
	var found any
	n := 0
	for _, item := range list {
		if match(item) {
			found = item
			n++
		}
	}
	if n != 1 {
		return nil, false
	}
	return found, true
}

func scanSetIn(set *fieldpath.Set, node any) bool {
	in := true
	set.Members.Iterate(func(pe fieldpath.PathElement) {
		if in {
			_, in = scanDesiredAt(node, pe)
		}
	})
	set.Children.Iterate(func(pe fieldpath.PathElement) {
		if !in {
			return
		}
		sub, _ := set.Children.Get(pe)
		c, ok := scanDesiredAt(node, pe)
		in = ok && scanSetIn(sub, c)
	})
	return in
}

func scanLeavesNotIn(set *fieldpath.Set, node any, at fieldpath.Path, out *[]fieldpath.Path) {
	set.Members.Iterate(func(pe fieldpath.PathElement) {
		if _, ok := scanDesiredAt(node, pe); !ok {
			*out = append(*out, append(slices.Clone(at), pe))
		}
	})
	set.Children.Iterate(func(pe fieldpath.PathElement) {
		sub, _ := set.Children.Get(pe)
		c, _ := scanDesiredAt(node, pe)
		scanLeavesNotIn(sub, c, append(at, pe), out)
	})
}

func scanPointerOf(desired, live any, fp fieldpath.Path) (pointer, bool) {
	var out pointer
	for _, pe := range fp {
		if pe.FieldName != nil {
			out = append(out, *pe.FieldName)
			desired, _ = step(desired, *pe.FieldName)
			live, _ = step(live, *pe.FieldName)
			continue
		}
		matches := func(i int, item any) bool {
			m, _ := item.(map[string]any)
			switch {
			case pe.Key != nil:
				return m != nil && keyMatches(m, *pe.Key)
			case pe.Value != nil:
				return item != nil && value.Equals(value.NewValueInterface(item), *pe.Value)
			case pe.Index != nil:
				return i == *pe.Index
			}
			return false
		}
		at := -1
		dl, _ := desired.([]any)
		ll, _ := live.([]any)
		for i, item := range dl {
			if matches(i, item) {
				at, desired = i, item
				break
			}
		}
		for i, item := range ll {
			if matches(i, item) {
				if at < 0 {
					at, desired = i, nil
				}
				live = item
				break
			}
		}
		if at < 0 {
			return nil, false
		}
		out = append(out, strconv.Itoa(at))
	}
	return out, true
}

func scanLiveAt(desired, live any, p pointer) (any, bool) {
	for _, t := range p {
		if list, ok := desired.([]any); ok {
			i, ok := index(t, len(list))
			if !ok {
				return nil, false
			}
			want := list[i]
			desired = want
			liveList, _ := live.([]any)
			if name, ok := nameOf(want); ok {
				j := slices.IndexFunc(liveList, func(item any) bool { n, ok := nameOf(item); return ok && n == name })
				if j < 0 {
					return nil, false
				}
				live = liveList[j]
				continue
			}
			if len(liveList) != len(list) {
				return nil, false
			}
			live = liveList[i]
			continue
		}
		var ok bool
		if live, ok = step(live, t); !ok {
			return nil, false
		}
		desired, _ = step(desired, t)
	}
	return live, true
}

func scanDiffPointers(desired, live any, at pointer, out *[]string) {
	if len(*out) > maxDriftFields {
		return
	}
	add := func(p pointer) { *out = append(*out, boundedPointer(p)) }
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			add(at)
			return
		}
		for _, k := range slices.Sorted(maps.Keys(d)) {
			dv := d[k]
			lv, present := l[k]
			p := append(slices.Clip(at), k)
			switch {
			case dv == nil:
				if present && lv != nil {
					add(p)
				}
			case !present:
				add(p)
			default:
				scanDiffPointers(dv, lv, p, out)
			}
		}
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(d) {
			add(at)
			return
		}
		for i := range d {
			scanDiffPointers(d[i], l[i], append(slices.Clip(at), strconv.Itoa(i)), out)
		}
	default:
		if !isSubset(desired, live) {
			add(at)
		}
	}
}

// scanDriftFields are the fields driftOf listed: every field that differs,
// and every added one looked for through the lists and among the fields
// before it.
func scanDriftFields(p *planned, live *unstructured.Unstructured, hand handEdits) []string {
	var fields []string
	scanDiffPointers(p.obj.Object, live.Object, nil, &fields)
	if !hand.unparsed {
		var added []fieldpath.Path
		scanLeavesNotIn(hand.fields.Leaves(), p.obj.Object, nil, &added)
		for _, fp := range added {
			if ptr, ok := scanPointerOf(p.obj.Object, live.Object, fp); ok && !slices.Contains(fields, boundedPointer(ptr)) {
				fields = append(fields, boundedPointer(ptr))
			}
		}
	}
	if len(fields) > maxDriftFields {
		fields = append(fields[:maxDriftFields-1], "…")
	}
	return fields
}

// Values whose equality value.Equals decides in its own ways: integers and
// floats equal as float64s (so 2^53 and 2^53+1 both equal the float 2^53,
// and not each other), NaN equal to nothing, null, nested lists and maps,
// the integer types other than int64, and types that no JSON document
// decodes to.
var trickyValues = []any{
	"a", "b", "", "1", int64(1), 1.0, 1.5, int64(-1), math.Copysign(0, -1), int64(0), float64(math.MaxInt64),
	int64(1 << 53), int64(1<<53 + 1), float64(1 << 53), int64(1<<53 - 1), float64(1<<53 - 1), int64(-1 << 53), float64(-1 << 53),
	math.NaN(), math.Inf(1), true, false, nil, int32(7), int64(7), float32(7), uint8(7),
	[]any{"a", int64(1)}, []any{"a", 1.0}, []any{}, map[string]any{"x": "a"}, map[string]any{"x": int64(2)},
	map[string]any{"x": 2.0}, map[string]any{}, map[string]any{"x": nil}, []any{map[string]any{"y": 1.5}},
	map[any]any{"x": "a"}, uint64(7), map[string]any(nil), []any(nil),
}

// randomList is a list of n items: maps with the fields name, port and
// protocol, some missing or null, or, once in a while, a value that is no
// map.
func randomList(r *rand.Rand, n int) []any {
	pick := func() any { return trickyValues[r.IntN(len(trickyValues))] }
	list := make([]any, n)
	for i := range list {
		if r.IntN(10) == 0 {
			list[i] = pick()
			continue
		}
		m := map[string]any{}
		for _, f := range []string{"name", "port", "protocol"} {
			switch r.IntN(6) {
			case 0:
			case 1:
				m[f] = nil
			case 2, 3:
				m[f] = pick()
			default:
				m[f] = fmt.Sprintf("%s%d", f, r.IntN(n+1))
			}
		}
		list[i] = m
	}
	return list
}

// randomElement is a key or value element that may name items of a list
// randomList made: keys of one field, of two, of the same field twice and
// of none, with their values picked from the list's items or among
// trickyValues.
func randomElement(r *rand.Rand, list []any) fieldpath.PathElement {
	pick := func(f string) any {
		if len(list) > 0 && r.IntN(2) == 0 {
			if m, ok := list[r.IntN(len(list))].(map[string]any); ok && m[f] != nil {
				return m[f]
			}
		}
		if r.IntN(3) == 0 {
			return fmt.Sprintf("%s%d", f, r.IntN(len(list)+1))
		}
		return trickyValues[r.IntN(len(trickyValues))]
	}
	switch r.IntN(8) {
	case 0:
		v := value.NewValueInterface(pick("name"))
		if len(list) > 0 && r.IntN(2) == 0 {
			v = value.NewValueInterface(list[r.IntN(len(list))])
		}
		return fieldpath.PathElement{Value: &v}
	case 1:
		return fieldpath.PathElement{Key: &value.FieldList{}}
	case 2:
		return fieldpath.PathElement{Key: fieldpath.KeyByFields("name", pick("name"), "name", pick("name"))}
	case 3, 4:
		return fieldpath.PathElement{Key: fieldpath.KeyByFields("port", pick("port"), "protocol", pick("protocol"))}
	default:
		return fieldpath.PathElement{Key: fieldpath.KeyByFields("name", pick("name"))}
	}
}

// sameValue compares values by their Go syntax, in which NaN is NaN.
func sameValue(a, b any) bool { return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b) }

// Looked up in the lists' indexes, items are those a look through each
// list finds: for keyed lists of one key field and two, set lists, lists by
// position, duplicates, items the element does not name, and values
// value.Equals compares in its own ways.
func TestListIndexesFindWhatALookThroughFinds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 1000 {
		n := []int{0, 1, 2, 5, 20, 60}[round%6]
		desired, live := randomList(r, n), randomList(r, n+r.IntN(3))
		if r.IntN(4) == 0 {
			// Items with duplicate keys.
			live = append(live, desired...)
		}
		shared := newListLookups()
		for range 20 {
			pe := randomElement(r, append(slices.Clip(desired), live...))
			if r.IntN(6) == 0 {
				pe = fieldpath.PathElement{Index: new(r.IntN(n+2) - 1)}
			}
			next := randomElement(r, live)
			for _, lists := range []*listLookups{shared, newListLookups()} {
				got, gotOK := lists.desiredAt(desired, pe)
				want, wantOK := scanDesiredAt(desired, pe)
				if gotOK != wantOK || !sameValue(got, want) {
					t.Fatalf("desiredAt(%v, %v) = %v, %v; a look-through finds %v, %v", desired, pe, got, gotOK, want, wantOK)
				}
				// A path on from the item, or, where live lacks it, from
				// live's list.
				port := "port"
				for _, fp := range []fieldpath.Path{{pe}, {pe, {FieldName: &port}}, {pe, next}} {
					gotP, gotOK := lists.pointerOf(desired, live, fp)
					wantP, wantOK := scanPointerOf(desired, live, fp)
					if gotOK != wantOK || !slices.Equal(gotP, wantP) {
						t.Fatalf("pointerOf(%v, %v, %v) = %v, %v; a look-through finds %v, %v", desired, live, fp, gotP, gotOK, wantP, wantOK)
					}
				}
			}
		}
		for i := range n + 1 {
			for _, lists := range []*listLookups{shared, newListLookups()} {
				p := pointer{strconv.Itoa(i), "port"}
				got, gotOK := lists.liveAt(desired, live, p)
				want, wantOK := scanLiveAt(desired, live, p)
				if gotOK != wantOK || !sameValue(got, want) {
					t.Fatalf("liveAt(%v, %v, %v) = %v, %v; a look-through finds %v, %v", desired, live, p, got, gotOK, want, wantOK)
				}
			}
		}
	}
}

const benchmarkListItems = 4000

// handEditedObject is a manifest with nested keyed lists (containers by
// name, their ports by port and protocol, their env by name, duplicates
// among them), a set list and a list by position; the live object after a
// hand edit that changed or removed k of its labels, added m env vars and a
// finalizer, and set labels whose keys are long enough for their pointers
// to be cut to the same one; and the fields that edit owns.
func handEditedObject(t *testing.T, k, m int) (*planned, *unstructured.Unstructured, handEdits) {
	t.Helper()
	desired := object(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","labels":{},"finalizers":["a","b","b"]},
		"spec":{"replicas":3,"template":{"spec":{"containers":[
			{"name":"web","image":"web:1","args":["-v","-x"],"ports":[{"containerPort":80,"protocol":"TCP"},{"containerPort":80,"protocol":"UDP"},{"containerPort":443}],
			 "env":[{"name":"A","value":"1"},{"name":"B","value":"2"},{"name":"B","value":"3"}]},
			{"name":"proxy","image":"proxy:1"},{"name":"proxy","image":"proxy:2"}]}}}}`)
	labels := desired["metadata"].(map[string]any)["labels"].(map[string]any)
	for i := range 18 {
		labels[fmt.Sprintf("l%02d", i)] = "v"
	}
	live := &unstructured.Unstructured{Object: object(t, mustJSON(t, desired))}
	liveLabels := live.Object["metadata"].(map[string]any)["labels"].(map[string]any)
	for i := range k {
		if i%2 == 0 {
			liveLabels[fmt.Sprintf("l%02d", i)] = "changed"
		} else {
			delete(liveLabels, fmt.Sprintf("l%02d", i))
		}
	}
	long := string(make([]byte, 300))
	liveLabels[long+"1"], liveLabels[long+"2"] = "x", "y"
	live.Object["metadata"].(map[string]any)["finalizers"] = []any{"a", "b", "b", "c"}
	web := live.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	for i := range m {
		web["env"] = append(web["env"].([]any), map[string]any{"name": fmt.Sprintf("N%d", i), "value": "x"})
	}

	set := &fieldpath.Set{}
	ins := func(p ...any) { set.Insert(fieldpath.MakePathOrDie(p...)) }
	for i := range 18 {
		ins("metadata", "labels", fmt.Sprintf("l%02d", i))
	}
	ins("metadata", "labels", long+"1")
	ins("metadata", "labels", long+"2")
	c := value.NewValueInterface("c")
	ins("metadata", "finalizers", fieldpath.PathElement{Value: &c})
	b := value.NewValueInterface("b")
	ins("metadata", "finalizers", fieldpath.PathElement{Value: &b})
	containers := []any{"spec", "template", "spec", "containers"}
	webAt := append(slices.Clip(containers), fieldpath.KeyByFields("name", "web"))
	ins(append(slices.Clip(webAt), "image")...)
	ins(append(slices.Clip(webAt), "args", 1)...)
	ins(append(slices.Clip(webAt), "ports", fieldpath.KeyByFields("containerPort", int64(80), "protocol", "TCP"), "protocol")...)
	ins(append(slices.Clip(webAt), "ports", fieldpath.KeyByFields("containerPort", int64(443), "protocol", "TCP"), "protocol")...)
	ins(append(slices.Clip(webAt), "env", fieldpath.KeyByFields("name", "A"), "value")...)
	ins(append(slices.Clip(webAt), "env", fieldpath.KeyByFields("name", "B"), "value")...)
	ins(append(slices.Clip(containers), fieldpath.KeyByFields("name", "proxy"), "image")...)
	ins(append(slices.Clip(containers), fieldpath.KeyByFields("name", "gone"), "image")...)
	for i := range m {
		env := append(slices.Clip(webAt), "env", fieldpath.KeyByFields("name", fmt.Sprintf("N%d", i)))
		ins(env...)
		ins(append(env, "name")...)
		ins(append(slices.Clip(env), "value")...)
	}
	return &planned{obj: &unstructured.Unstructured{Object: desired}}, live, handEdits{names: []string{"kubectl-edit"}, fields: set}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := (&unstructured.Unstructured{Object: v.(map[string]any)}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// coveredBy, addedMetadataKeys and the fields of driftOf are what they
// were with look-throughs, for fewer drifted fields than a record lists,
// as many, and more.
func TestHandEditsAreToldAsLookThroughsTellThem(t *testing.T) {
	now := time.Now()
	for k := range 19 {
		for _, m := range []int{0, 1, 2, 7, 8, 9, 20} {
			p, live, h := handEditedObject(t, k, m)
			if got, want := h.coveredBy(p.obj.Object), scanSetIn(h.fields, p.obj.Object); got != want {
				t.Errorf("%d labels changed, %d vars added: coveredBy = %v, a look-through %v", k, m, got, want)
			}
			var uncovered []fieldpath.Path
			scanLeavesNotIn(h.fields.Leaves(), p.obj.Object, nil, &uncovered)
			var got []fieldpath.Path
			leavesNotIn(h.fields.Leaves(), p.obj.Object, nil, &got, newListLookups())
			if !slices.EqualFunc(got, uncovered, fieldpath.Path.Equals) {
				t.Errorf("%d labels changed, %d vars added: uncovered leaves %v, a look-through %v", k, m, got, uncovered)
			}
			if got, want := driftOf(p, live, h, now).Fields, scanDriftFields(p, live, h); !slices.Equal(got, want) {
				t.Errorf("%d labels changed, %d vars added: drift of %q, a look-through %q", k, m, got, want)
			}
			none := handEdits{fields: &fieldpath.Set{}}
			if got, want := driftOf(p, live, none, now).Fields, scanDriftFields(p, live, none); !slices.Equal(got, want) {
				t.Errorf("%d labels changed, %d vars added, no hand edit: drift of %q, want %q", k, m, got, want)
			}
		}
	}
	// Fields the manifest sets, each in an item it has once.
	p, _, _ := handEditedObject(t, 0, 0)
	covered := &fieldpath.Set{}
	a := value.NewValueInterface("a")
	web := []any{"spec", "template", "spec", "containers", fieldpath.KeyByFields("name", "web")}
	for _, fp := range [][]any{
		{"metadata", "labels", "l03"}, {"metadata", "finalizers", fieldpath.PathElement{Value: &a}},
		append(slices.Clip(web), "image"), append(slices.Clip(web), "env", fieldpath.KeyByFields("name", "A"), "value"),
		append(slices.Clip(web), "ports", fieldpath.KeyByFields("containerPort", int64(80), "protocol", "TCP"), "protocol"),
	} {
		covered.Insert(fieldpath.MakePathOrDie(fp...))
	}
	if got, want := (handEdits{fields: covered}).coveredBy(p.obj.Object), scanSetIn(covered, p.obj.Object); !got || !want {
		t.Errorf("coveredBy = %v, a look-through %v, want both true", got, want)
	}
	// Only added labels: the keys to remove.
	set := &fieldpath.Set{}
	set.Insert(fieldpath.MakePathOrDie("metadata", "labels", "l00"))
	set.Insert(fieldpath.MakePathOrDie("metadata", "labels", "hand"))
	keys, ok := handEdits{fields: set}.addedMetadataKeys(p.obj.Object)
	if !ok || !slices.EqualFunc(keys, [][]string{{"metadata", "labels", "hand"}}, slices.Equal) {
		t.Errorf("addedMetadataKeys = %v, %v", keys, ok)
	}
}

// Every list is indexed once for all the lookups in it: the items visited
// are those of the lists, whatever the number of lookups.
func TestListsAreIndexedOnce(t *testing.T) {
	const n = 2000
	p, _, h := handEditedEnv(n, 0, true)
	lists := newListLookups()
	if !setIn(h.fields, p.obj.Object, lists) {
		t.Fatal("hand edits not covered")
	}
	// The containers, one, and the env vars.
	if got := lookedThrough(lists); got != 1+n {
		t.Errorf("covering %d hand-edited fields visited %d items, want %d", n, got, 1+n)
	}

	p, live, h := handEditedEnv(n, n, false)
	lists = newListLookups()
	var added []fieldpath.Path
	leavesNotIn(h.fields.Leaves(), p.obj.Object, nil, &added, lists)
	if len(added) != 2*n {
		t.Fatalf("%d fields added, want %d", len(added), 2*n)
	}
	for _, fp := range added {
		if _, ok := lists.pointerOf(p.obj.Object, live.Object, fp); !ok {
			t.Fatalf("no pointer for %v", fp)
		}
	}
	if got, want := lookedThrough(lists), 1+n+1+2*n; got != want {
		t.Errorf("pointers to %d added fields visited %d items, want %d", 2*n, got, want)
	}

	lists = newListLookups()
	for i := range n {
		if _, ok := lists.liveAt(p.obj.Object, live.Object, pointer{"spec", "template", "spec", "containers", "0", "env", strconv.Itoa(i), "value"}); !ok {
			t.Fatalf("env var %d not found in live", i)
		}
	}
	if got, want := lookedThrough(lists), 1+2*n; got != want {
		t.Errorf("%d ignored fields taken from live visited %d items, want %d", n, got, want)
	}
}

// A lookup the budget cannot answer finds nothing: the answer taken when
// it is not known whether one item or more is named.
func TestListLookupsOutOfBudgetFindNothing(t *testing.T) {
	p, live, h := handEditedEnv(100, 0, true)
	lists := newListLookups()
	lists.budget = 50
	if setIn(h.fields, p.obj.Object, lists) {
		t.Error("hand edits covered past the budget")
	}
	lists.budget = 50
	if _, ok := lists.liveAt(p.obj.Object, live.Object, pointer{"spec", "template", "spec", "containers", "0", "env", "0", "value"}); ok {
		t.Error("a live value found past the budget")
	}
	lists.budget = 50
	if _, ok := lists.pointerOf(p.obj.Object, live.Object, envPath("e0", "value")); ok {
		t.Error("a pointer given past the budget")
	}
	// A float cannot be indexed: the list is looked through, within the
	// budget.
	f := value.NewValueInterface(1.5)
	list := make([]any, 100)
	for i := range list {
		list[i] = float64(i) + 0.5
	}
	lists = newListLookups()
	lists.budget = 99
	if _, ok := lists.desiredAt(list, fieldpath.PathElement{Value: &f}); ok {
		t.Error("an item found past the budget")
	}
	lists.budget = 100
	if got, ok := lists.desiredAt(list, fieldpath.PathElement{Value: &f}); !ok || got != 1.5 {
		t.Errorf("desiredAt = %v, %v within the budget", got, ok)
	}
}

// A key field as large as an object, and the list's items named by that
// field and each of many others: the list is indexed while the encodings
// fit in maxIndexBytes, then looked through, and the items found are the
// same.
func TestListIndexesAreBoundedInBytes(t *testing.T) {
	large := string(make([]byte, 1<<20))
	list := []any{map[string]any{"x": large, "y0": "a"}, map[string]any{"x": "b", "y0": "a"}}
	for i := 1; i < 40; i++ {
		list[0].(map[string]any)[fmt.Sprintf("y%d", i)] = "a"
	}
	lists := newListLookups()
	for i := range 40 {
		pe := fieldpath.PathElement{Key: fieldpath.KeyByFields("x", "b", fmt.Sprintf("y%d", i), "a")}
		got, gotOK := lists.desiredAt(list, pe)
		want, wantOK := scanDesiredAt(list, pe)
		if gotOK != wantOK || !sameValue(got, want) {
			t.Fatalf("key %v: found %v, %v; a look-through %v, %v", pe, got, gotOK, want, wantOK)
		}
	}
	if lists.indexBytes > maxIndexBytes+len(large)+64 {
		t.Errorf("indexes of %d bytes, want at most %d and one item", lists.indexBytes, maxIndexBytes)
	}
	if lists.indexBytes < maxIndexBytes {
		t.Errorf("indexes of %d bytes: the test wants more than %d asked for", lists.indexBytes, maxIndexBytes)
	}
}

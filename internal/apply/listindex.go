// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"encoding/binary"
	"maps"
	"math"
	"slices"
	"strconv"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// listLookups finds list items by the elements of field sets that name
// them, both ways.
//
// find gives the element of a field set's list that names an item of the
// desired list. A list's elements are its items' keys, values or
// positions, sorted: the element an item would have is built from the item
// and looked up, the kinds of element of each list read once. Only when
// that finds nothing are the list's elements looked through. Looked through
// for each pointer, a list a hand-edit manager owns of 20,000 items and
// 2,048 pointers into it took 2.8 s for one object, at every reconcile of
// it.
//
// items gives the items of an object's list that an element names. Each
// list is indexed once, by what names its items, and the index kept for
// the lookups that follow: looked through for each element, a list of
// 4,000 items edited by hand cost seconds at every reconcile of the object.
//
// Look-throughs, and the building of indexes, are bounded by maxListScan
// items and elements for all the lookups of one listLookups: one per set,
// or per object and question about it. The indexes' encodings are bounded
// by maxIndexBytes: a field set may name the items of a list by many
// different key fields, each asking for an index of the list, and a key
// field may hold a value as large as the object.
type listLookups struct {
	kinds  map[*fieldpath.Set]listKinds
	budget int
	// indexes are those of the object lists items has looked in, and
	// indexBytes the bytes of their encodings.
	indexes    map[listIndexKey]*listIndex
	indexBytes int
}

// maxIndexBytes bounds the encodings one listLookups indexes lists by. An
// object's key fields and set lists, each indexed once, take a fraction of
// its size, at most 1.5 MiB in etcd; a list whose index would not fit is
// looked through, within the budget.
const maxIndexBytes = 16 << 20

// listKinds are the kinds of element a list of a field set holds: the key
// fields of its keyed elements (those of the first), values, positions.
type listKinds struct {
	keyNames        []string
	values, indices bool
}

// maxListScan bounds the elements that look-throughs visit per set: a
// look-through is for elements a lookup cannot build, which no list of
// the API server's own making has.
const maxListScan = 1 << 20

func newListLookups() *listLookups {
	return &listLookups{kinds: map[*fieldpath.Set]listKinds{}, budget: maxListScan}
}

func (l *listLookups) kindsOf(set *fieldpath.Set) listKinds {
	if k, ok := l.kinds[set]; ok {
		return k
	}
	var k listKinds
	note := func(pe fieldpath.PathElement) {
		switch {
		case pe.Key != nil && k.keyNames == nil:
			for _, f := range *pe.Key {
				k.keyNames = append(k.keyNames, f.Name)
			}
		case pe.Value != nil:
			k.values = true
		case pe.Index != nil:
			k.indices = true
		}
	}
	set.Children.Iterate(note)
	set.Members.Iterate(note)
	l.kinds[set] = k
	return k
}

// find returns the element of set, a list, naming item, the i-th item of
// the desired list; among its members too when last.
func (l *listLookups) find(set *fieldpath.Set, item any, i int, last bool) (fieldpath.PathElement, bool) {
	m, _ := item.(map[string]any)
	// The elements that would name item, looked up directly first; a scan
	// of set matches each of its elements only when none is there.
	for _, pe := range elementsNaming(l.kindsOf(set), m, item, i) {
		if _, ok := set.Children.Get(pe); ok || (last && set.Members.Has(pe)) {
			return pe, true
		}
	}
	var found *fieldpath.PathElement
	match := func(pe fieldpath.PathElement) {
		if found != nil || l.budget <= 0 {
			return
		}
		l.budget--
		switch {
		case pe.Key != nil && m != nil && keyMatches(m, *pe.Key),
			pe.Value != nil && item != nil && value.Equals(value.NewValueInterface(item), *pe.Value),
			pe.Index != nil && *pe.Index == i:
			found = &pe
		}
	}
	set.Children.Iterate(match)
	if last {
		set.Members.Iterate(match)
	}
	if found == nil {
		return fieldpath.PathElement{}, false
	}
	return *found, true
}

// elementsNaming returns the elements of the kinds a list's field set
// holds that would name item (m when it is a map), the i-th item: by its
// key, by its value, by its index.
func elementsNaming(kinds listKinds, m map[string]any, item any, i int) []fieldpath.PathElement {
	var built []fieldpath.PathElement
	if m != nil && kinds.keyNames != nil {
		key := make(value.FieldList, 0, len(kinds.keyNames))
		for _, n := range kinds.keyNames {
			v, ok := m[n]
			if !ok {
				key = nil
				break
			}
			key = append(key, value.Field{Name: n, Value: value.NewValueInterface(v)})
		}
		if key != nil {
			key.Sort()
			built = append(built, fieldpath.PathElement{Key: &key})
		}
	}
	if kinds.values && item != nil {
		v := value.NewValueInterface(item)
		built = append(built, fieldpath.PathElement{Value: &v})
	}
	if kinds.indices {
		built = append(built, fieldpath.PathElement{Index: &i})
	}
	return built
}

// listIndexKey names a list of an object, by its first item's address and
// its length, and what its items are indexed by: the names of the key
// fields of the elements looked up (byValue false), or the items' values.
// The lists of the objects looked in do not change while they are.
type listIndexKey struct {
	first   *any
	n       int
	byValue bool
	names   string
}

// listIndex holds the items of one list by the exact encoding (see
// exactEncoder) of their key fields' values, or of their values.
type listIndex struct {
	at map[string]listPositions
	// rest are the positions, ascending, of the items that may be named
	// but have no exact encoding: matched one by one.
	rest []int
}

// listPositions are the first position of the items with an encoding, and
// how many there are.
type listPositions struct{ first, n int }

// items returns the position of the first item of list that pe, a key or a
// value element of a field set, names, and how many items it names: first
// is -1 when none. match is the test of one item against pe, for the items
// the index cannot tell. ok is false when l's budget ran out before the
// answer was known.
func (l *listLookups) items(list []any, pe fieldpath.PathElement, match func(any) bool) (first, n int, ok bool) {
	if len(list) == 0 || (pe.Key == nil && pe.Value == nil) {
		return -1, 0, true
	}
	var e exactEncoder
	k := listIndexKey{first: &list[0], n: len(list), byValue: pe.Key == nil}
	exact := true
	if pe.Key != nil {
		var names []byte
		for _, f := range *pe.Key {
			names = binary.AppendUvarint(names, uint64(len(f.Name)))
			names = append(names, f.Name...)
			exact = exact && f.Value != nil && e.add(f.Value.Unstructured())
		}
		k.names = string(names)
		// An empty key matches every item that is a map, and the tests of
		// the callers differ on a nil map: no index tells them.
		exact = exact && len(*pe.Key) > 0
	} else {
		exact = e.add((*pe.Value).Unstructured())
	}
	if !exact {
		return l.scan(list, nil, match)
	}
	idx := l.index(list, k, pe.Key)
	if idx == nil {
		return l.scan(list, nil, match)
	}
	first, n = -1, 0
	if at, found := idx.at[string(e.buf)]; found {
		first, n = at.first, at.n
	}
	// Of items without an exact encoding, only a map can equal an exact
	// value: see exactEncoder.
	if e.hasMap && len(idx.rest) > 0 {
		rf, rn, ok := l.scan(list, idx.rest, match)
		if !ok {
			return -1, 0, false
		}
		if rf >= 0 && (first < 0 || rf < first) {
			first = rf
		}
		n += rn
	}
	return first, n, true
}

// scan matches the items of list at positions (ascending; all when nil)
// one by one, within l's budget.
func (l *listLookups) scan(list []any, positions []int, match func(any) bool) (first, n int, ok bool) {
	first = -1
	visit := func(i int) bool {
		if l.budget <= 0 {
			return false
		}
		l.budget--
		if match(list[i]) {
			if first < 0 {
				first = i
			}
			n++
		}
		return true
	}
	if positions == nil {
		for i := range list {
			if !visit(i) {
				return -1, 0, false
			}
		}
		return first, n, true
	}
	for _, i := range positions {
		if !visit(i) {
			return -1, 0, false
		}
	}
	return first, n, true
}

// index returns the index k names, built from list when l has none yet; nil
// when l's budget or maxIndexBytes cannot pay for it. key is the element
// whose key field names the index is by; nil for values.
func (l *listLookups) index(list []any, k listIndexKey, key *value.FieldList) *listIndex {
	if idx, ok := l.indexes[k]; ok {
		return idx
	}
	if l.budget < len(list) || l.indexBytes >= maxIndexBytes {
		return nil
	}
	l.budget -= len(list)
	idx := &listIndex{at: map[string]listPositions{}}
	var e exactEncoder
	for i, item := range list {
		if l.indexBytes += len(e.buf); l.indexBytes >= maxIndexBytes {
			return nil
		}
		e.buf, e.hasMap = e.buf[:0], false
		exact := true
		if key != nil {
			// An item without a key field, or with a null one, matches
			// no key (keyMatches), and one that is no map none either.
			m, _ := item.(map[string]any)
			named := m != nil
			for _, f := range *key {
				v, ok := m[f.Name]
				if !ok || v == nil {
					named = false
					break
				}
				exact = exact && e.add(v)
			}
			if !named {
				continue
			}
		} else {
			if item == nil {
				continue
			}
			exact = e.add(item)
		}
		if !exact {
			idx.rest = append(idx.rest, i)
			continue
		}
		at, found := idx.at[string(e.buf)]
		if !found {
			at.first = i
		}
		at.n++
		idx.at[string(e.buf)] = at
	}
	l.indexBytes += len(e.buf)
	if l.indexes == nil {
		l.indexes = map[listIndexKey]*listIndex{}
	}
	l.indexes[k] = idx
	return idx
}

// maxExactInt bounds the integers exactEncoder encodes: below it a
// float64 holds each exactly, so that an integer and a float value.Equals
// finds equal to it encode the same, and no other number does.
const maxExactInt = 1 << 53

// exactEncoder encodes a value of an unstructured object so that two values
// encode the same exactly when value.Equals finds them equal. It cannot for
// every value: value.Equals compares an integer with a float as float64s,
// which rounds integers from 2^53 on, so that two integers it tells apart
// can both equal one float. A number it cannot encode (from 2^53 on, or
// with a fraction), or a type no JSON document decodes to, makes add
// report false; such a value can equal no value it encodes that holds no
// map (a map of another type might).
type exactEncoder struct {
	buf []byte
	// hasMap is set when a map was encoded.
	hasMap bool
}

func (e *exactEncoder) add(v any) bool {
	switch v := v.(type) {
	case nil:
		e.buf = append(e.buf, 'n')
	case bool:
		if v {
			e.buf = append(e.buf, 't')
		} else {
			e.buf = append(e.buf, 'f')
		}
	case string:
		e.buf = append(e.buf, 's')
		e.buf = binary.AppendUvarint(e.buf, uint64(len(v)))
		e.buf = append(e.buf, v...)
	case int64:
		return e.addInt(v)
	case float64:
		return e.addFloat(v)
	case []any:
		e.buf = append(e.buf, 'l')
		e.buf = binary.AppendUvarint(e.buf, uint64(len(v)))
		for _, x := range v {
			if !e.add(x) {
				return false
			}
		}
	case map[string]any:
		e.hasMap = true
		e.buf = append(e.buf, 'm')
		e.buf = binary.AppendUvarint(e.buf, uint64(len(v)))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			e.buf = binary.AppendUvarint(e.buf, uint64(len(k)))
			e.buf = append(e.buf, k...)
			if !e.add(v[k]) {
				return false
			}
		}
	default:
		// The other numbers value.Equals knows, as it reads them.
		switch nv := value.NewValueInterface(v); {
		case nv.IsFloat():
			return e.addFloat(nv.AsFloat())
		case nv.IsInt():
			return e.addInt(nv.AsInt())
		}
		return false
	}
	return true
}

func (e *exactEncoder) addInt(i int64) bool {
	if i <= -maxExactInt || i >= maxExactInt {
		return false
	}
	e.buf = append(e.buf, 'i')
	e.buf = strconv.AppendInt(e.buf, i, 10)
	e.buf = append(e.buf, ';')
	return true
}

func (e *exactEncoder) addFloat(f float64) bool {
	// NaN fails the first test, infinities the second.
	if f != math.Trunc(f) || math.Abs(f) >= maxExactInt {
		return false
	}
	return e.addInt(int64(f))
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"bytes"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// handEdits is what the hand-edit managers (the configured override
// managers, such as kubectl-edit) own on one live object. Their FieldsV1 are
// parsed once, here, and every question about them is asked of the union.
type handEdits struct {
	// names are the hand-edit managers found, in order of first appearance.
	names []string
	// fields is the union of their field sets.
	fields *fieldpath.Set
	// unparsed is set when a FieldsV1 of theirs could not be read: what it
	// owns is unknown, so nothing can be said to cover it.
	unparsed bool
}

// parseHandEdits collects the field sets of the entries whose manager is
// one of overrides. keep, when not nil, trims each set to the fields that
// count (spec.ignore hands the others to anyone); a manager left with none
// made no hand edit.
//
// Whoever may update an object writes its managedFields as it likes, as
// many entries of one manager as it wants (told apart by subresource): a
// union grown entry by entry, with keep asked of each, took 50 s for 8,000
// entries under spec.ignore's 2,048 pointers. Each manager's sets are
// merged pairwise and trimmed once, in 0.2 s; keep trims path by path, so
// this is the union of each entry trimmed alone
// (go test -bench BenchmarkHandEditsOfManyEntries ./internal/apply/).
func parseHandEdits(entries []metav1.ManagedFieldsEntry, overrides []string, keep func(*fieldpath.Set) *fieldpath.Set) handEdits {
	h := handEdits{fields: &fieldpath.Set{}}
	managers := groupHandEdits(entries, overrides, func(m *managerSets, at int, err error) {
		// An entry whose fields are unknown names its manager: nothing
		// shows them all ignored.
		if err != nil {
			h.unparsed = true
		}
		m.namedAt(at)
	})
	var kept []*fieldpath.Set
	for _, m := range managers {
		if len(m.sets) == 0 {
			continue
		}
		set := unionAll(m.sets)
		if keep == nil {
			m.namedAt(m.at[0])
			kept = append(kept, set)
			continue
		}
		if set = keep(set); set.Empty() {
			continue
		}
		kept = append(kept, set)
		// The manager is named from its first entry with a field left,
		// as it would be were each entry trimmed alone.
		for j, s := range m.sets {
			if m.first >= 0 && m.at[j] > m.first {
				break
			}
			if anyIn(s, set) {
				m.namedAt(m.at[j])
				break
			}
		}
	}
	named := slices.DeleteFunc(managers, func(m *managerSets) bool { return m.first < 0 })
	slices.SortFunc(named, func(a, b *managerSets) int { return a.first - b.first })
	for _, m := range named {
		h.names = append(h.names, m.manager)
	}
	if len(kept) > 0 {
		h.fields = unionAll(kept)
	}
	return h
}

// managerSets are the readable field sets of one hand-edit manager's
// entries, and where those entries are.
type managerSets struct {
	manager string
	sets    []*fieldpath.Set
	at      []int
	// first is the index of the first entry that names the manager among
	// the hand-edit managers, -1 while none does.
	first int
}

// namedAt records that the entry at index at names m.
func (m *managerSets) namedAt(at int) {
	if m.first < 0 || at < m.first {
		m.first = at
	}
}

// groupHandEdits parses the FieldsV1 of the entries whose manager is one of
// overrides, and groups the sets by manager, in order of first appearance.
// unread, when not nil, is called for each of those entries that has no
// FieldsV1 (err nil) or one that cannot be parsed.
func groupHandEdits(entries []metav1.ManagedFieldsEntry, overrides []string, unread func(m *managerSets, at int, err error)) []*managerSets {
	var out []*managerSets
	byManager := map[string]*managerSets{}
	for i, e := range entries {
		if !slices.Contains(overrides, e.Manager) {
			continue
		}
		m := byManager[e.Manager]
		if m == nil {
			m = &managerSets{manager: e.Manager, first: -1}
			byManager[e.Manager] = m
			out = append(out, m)
		}
		var set *fieldpath.Set
		var err error
		if e.FieldsV1 != nil {
			set, err = parseFieldsV1(e.FieldsV1)
		}
		if set == nil {
			if unread != nil {
				unread(m, i, err)
			}
			continue
		}
		m.sets = append(m.sets, set)
		m.at = append(m.at, i)
	}
	return out
}

// unionAll is the union of sets, merged in pairs, then pairs of those: a
// union costs the size of both sets, so merging each set into one growing
// union would cost their number times their total size, where pairs cost
// the total size times the logarithm of their number.
func unionAll(sets []*fieldpath.Set) *fieldpath.Set {
	if len(sets) == 0 {
		return &fieldpath.Set{}
	}
	for len(sets) > 1 {
		next := make([]*fieldpath.Set, 0, (len(sets)+1)/2)
		for i := 0; i+1 < len(sets); i += 2 {
			next = append(next, sets[i].Union(sets[i+1]))
		}
		if len(sets)%2 == 1 {
			next = append(next, sets[len(sets)-1])
		}
		sets = next
	}
	return sets[0]
}

// anyIn reports whether set has a field of in.
func anyIn(set, in *fieldpath.Set) bool {
	found := false
	set.Iterate(func(p fieldpath.Path) {
		found = found || in.Has(p)
	})
	return found
}

// fieldsIn returns the fields of set that are in in. It looks each up,
// where an intersection would walk all of in: one per entry of a manager,
// against the fields of all its entries, would cost their number times
// those fields.
func fieldsIn(set, in *fieldpath.Set) *fieldpath.Set {
	out := &fieldpath.Set{}
	set.Iterate(func(p fieldpath.Path) {
		if in.Has(p) {
			out.Insert(p)
		}
	})
	return out
}

func parseFieldsV1(f *metav1.FieldsV1) (*fieldpath.Set, error) {
	set := &fieldpath.Set{}
	if err := set.FromJSON(bytes.NewReader(f.Raw)); err != nil {
		return nil, err
	}
	return set, nil
}

// managers returns the hand-edit managers that own fields of the object.
func (h handEdits) managers() []string {
	return h.names
}

// coveredBy reports whether every field the hand-edit managers own is one
// desired sets. Then a forced apply takes all of them back by itself, and the
// managedFields rewrite of managedFieldsTakenOver (two more requests) is not
// needed. A null in desired asks for the field's absence, so it does not
// cover it.
func (h handEdits) coveredBy(desired map[string]any) bool {
	return !h.unparsed && setIn(h.fields, desired, newListLookups())
}

// setIn reports whether node has every path of set: its members, and the
// nodes its children hang from. lists looks list items up.
func setIn(set *fieldpath.Set, node any, lists *listLookups) bool {
	// Iterate, not a range over All: All in structured-merge-diff v6.4.2
	// does not stop when the loop breaks, and the runtime panics.
	in := true
	set.Members.Iterate(func(pe fieldpath.PathElement) {
		if in {
			_, in = lists.desiredAt(node, pe)
		}
	})
	set.Children.Iterate(func(pe fieldpath.PathElement) {
		if !in {
			return
		}
		sub, _ := set.Children.Get(pe)
		c, ok := lists.desiredAt(node, pe)
		in = ok && setIn(sub, c, lists)
	})
	return in
}

// desiredAt returns the value pe selects in node, a value of the desired
// object, and whether desired sets it.
//
// A key (k:) selects the one list item whose key fields have those values;
// the key fields are those of the live object, which may hold defaults the
// manifest leaves out (a port's protocol): then no item matches, which is
// the safe answer, "not set". A value (v:) selects the item of a set list
// equal to it. An index (i:) is not mapped: a position in the live list
// need not be the same one in the manifest's.
//
// Two items selected would be a manifest the API server rejects, and which
// of them pe means cannot be told: none is. Nor is one when l's budget ran
// out before the list's items were told apart.
func (l *listLookups) desiredAt(node any, pe fieldpath.PathElement) (any, bool) {
	var match func(any) bool
	switch {
	case pe.FieldName != nil:
		m, _ := node.(map[string]any)
		v, ok := m[*pe.FieldName]
		return v, ok && v != nil
	case pe.Key != nil:
		match = func(item any) bool {
			m, ok := item.(map[string]any)
			return ok && keyMatches(m, *pe.Key)
		}
	case pe.Value != nil:
		match = func(item any) bool {
			return item != nil && value.Equals(value.NewValueInterface(item), *pe.Value)
		}
	default:
		return nil, false
	}
	list, _ := node.([]any)
	at, n, ok := l.items(list, pe, match)
	if !ok || n != 1 {
		return nil, false
	}
	return list[at], true
}

func keyMatches(item map[string]any, key value.FieldList) bool {
	for _, f := range key {
		v, ok := item[f.Name]
		if !ok || v == nil || !value.Equals(value.NewValueInterface(v), f.Value) {
			return false
		}
	}
	return true
}

// addedMetadataKeys returns the labels and annotations that the hand-edit
// managers own and desired does not set, as paths such as
// ["metadata", "labels", key], when those are all the hand edits beyond
// desired's own fields. Removing them is then one small patch, where taking
// the fields over (managedFieldsTakenOver) costs a read, a managedFields
// rewrite and an apply. Keys are returned as they are: escaping them for a
// JSON pointer is the caller's.
//
// Only leaves count: a labels map the hand edit created (its "." marker)
// goes empty with its keys, and an empty map next to the manifest's fields
// changes nothing the manifest asks for.
func (h handEdits) addedMetadataKeys(desired map[string]any) (paths [][]string, ok bool) {
	if h.unparsed {
		return nil, false
	}
	onlyMetadata := eachLeafNotIn(h.fields.Leaves(), desired, nil, newListLookups(), func(p fieldpath.Path) bool {
		key, ok := metadataKey(p)
		paths = append(paths, key)
		return ok
	})
	if !onlyMetadata {
		return nil, false
	}
	return paths, len(paths) > 0
}

// eachLeafNotIn calls yield with the path of each leaf of set that node does
// not have, until yield returns false, and reports whether it went through
// them all. Below a node desired does not set, every leaf is uncovered.
// lists looks list items up. The path is yield's to read, not to keep: a hand edit's field
// set is anyone's to make, thousands of leaves a thousand levels deep, and
// a copy of each path held at once took a gigabyte.
func eachLeafNotIn(set *fieldpath.Set, node any, at fieldpath.Path, lists *listLookups, yield func(fieldpath.Path) bool) bool {
	more := true
	set.Members.Iterate(func(pe fieldpath.PathElement) {
		if !more {
			return
		}
		if _, ok := lists.desiredAt(node, pe); !ok {
			more = yield(append(at, pe))
		}
	})
	set.Children.Iterate(func(pe fieldpath.PathElement) {
		if !more {
			return
		}
		sub, _ := set.Children.Get(pe)
		c, _ := lists.desiredAt(node, pe)
		more = eachLeafNotIn(sub, c, append(at, pe), lists, yield)
	})
	return more
}

// metadataKey returns p as ["metadata", "labels"|"annotations", key].
func metadataKey(p fieldpath.Path) ([]string, bool) {
	if len(p) != 3 {
		return nil, false
	}
	out := make([]string, len(p))
	for i, pe := range p {
		if pe.FieldName == nil {
			return nil, false
		}
		out[i] = *pe.FieldName
	}
	if out[0] != "metadata" || (out[1] != "labels" && out[1] != "annotations") {
		return nil, false
	}
	return out, true
}

// managedFieldsTakenOver rewrites managedFields so that the fields owned by
// the hand-edit managers (overrides) become manager's, in its Apply entry of
// the main resource. The apply that follows then removes those of them the
// manifest does not set (server-side apply deletes fields their sole owner
// stops applying) and restores the rest. ok is false when there is nothing to
// take over.
//
// A hand-edit entry whose FieldsV1 cannot be read is dropped all the same:
// its fields become nobody's and stay as they are, where keeping it would
// find the same hand edit on every sync. If manager's own entry cannot be
// read, the hand-edit fields replace it; the apply that follows sets
// manager's fields anew.
func managedFieldsTakenOver(entries []metav1.ManagedFieldsEntry, overrides []string, take func(*fieldpath.Set) *fieldpath.Set, manager, apiVersion string, now metav1.Time) ([]metav1.ManagedFieldsEntry, bool) {
	managers := groupHandEdits(entries, overrides, nil)
	if len(managers) == 0 {
		return entries, false
	}
	// As in parseHandEdits, take is asked once per manager, of the union of
	// its entries' sets. What it leaves, spec.ignore hands to others.
	parsed := make([]*fieldpath.Set, len(entries))
	mine := make([]*fieldpath.Set, 0, len(managers))
	ignored := map[string]*fieldpath.Set{}
	for _, m := range managers {
		for j, at := range m.at {
			parsed[at] = m.sets[j]
		}
		set := unionAll(m.sets)
		own := set
		if take != nil {
			own = take(set)
			if rest := set.Difference(own); !rest.Empty() {
				ignored[m.manager] = rest
			}
		}
		mine = append(mine, own)
	}
	taken := unionAll(mine)
	keep := make([]metav1.ManagedFieldsEntry, 0, len(entries)+1)
	at := -1
	for i, e := range entries {
		if slices.Contains(overrides, e.Manager) {
			// Fields spec.ignore hands to others stay with the manager
			// that wrote them.
			if ign := ignored[e.Manager]; ign != nil && parsed[i] != nil {
				if rest := fieldsIn(parsed[i], ign); !rest.Empty() {
					if raw, err := rest.ToJSON(); err == nil {
						e.FieldsV1 = &metav1.FieldsV1{Raw: raw}
						keep = append(keep, e)
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
		// ToJSON fails only on a path element it cannot write, and every
		// one here was read from FieldsV1.
		return entries, false
	}
	// The entry gained fields: its time says when, as the API server's
	// own bookkeeping would.
	keep[at].Time = &now
	keep[at].FieldsV1 = &metav1.FieldsV1{Raw: raw}
	return keep, true
}

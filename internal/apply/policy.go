// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// objectPolicy is what the per-object annotations of a manifest object ask
// for. The manifest parser has already refused unknown values.
type objectPolicy struct {
	// createOnly: apply IfNotPresent, created when missing and never
	// changed afterwards.
	createOnly bool
	// ignored: apply Ignore, never applied, pruned or deleted.
	ignored bool
	// force: recreate the object on an immutable-field change.
	force bool
}

func policyOf(obj *unstructured.Unstructured) objectPolicy {
	a := obj.GetAnnotations()
	return objectPolicy{
		createOnly: a[v1alpha1.ApplyPolicyAnnotation] == "IfNotPresent",
		ignored:    a[v1alpha1.ApplyPolicyAnnotation] == "Ignore",
		force:      a[v1alpha1.ForcePolicyAnnotation] == "enabled",
	}
}

// pruneDisabled reports an object that asks, through the annotation it
// carries, to be kept when it leaves the manifest or its resource is
// deleted. The annotation stays on the applied object, so the policy holds
// after the manifest no longer says it. Whoever can annotate the object can
// also delete it or strip Vidra's marks, so honouring it grants nothing.
func pruneDisabled(live metav1.Object) bool {
	return live.GetAnnotations()[v1alpha1.PrunePolicyAnnotation] == "disabled"
}

// pointer is a JSON pointer (RFC 6901), split and unescaped.
type pointer []string

func parsePointer(s string) (pointer, error) {
	if !strings.HasPrefix(s, "/") {
		return nil, fmt.Errorf("%q is not a JSON pointer: it must start with /", s)
	}
	tokens := strings.Split(s[1:], "/")
	for i, t := range tokens {
		if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(t, "~0", ""), "~1", ""), "~") {
			return nil, fmt.Errorf("%q is not a JSON pointer: ~ must be followed by 0 or 1", s)
		}
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

func (p pointer) String() string {
	return "/" + strings.Join(escapePointer(p), "/")
}

// protectedPaths are the fields that make an object the one Vidra manages:
// its identity and Vidra's marks. A rule may not hand them, or a map that
// holds them, to anyone else.
var protectedPaths = []pointer{
	{"apiVersion"}, {"kind"}, {"metadata", "name"}, {"metadata", "namespace"},
	{"metadata", "labels", v1alpha1.ManagedByLabel}, {"metadata", "labels", v1alpha1.OwnerUIDLabel}, {"metadata", "labels", v1alpha1.BucketLabel},
	{"metadata", "annotations", v1alpha1.OwnedByAnnotation},
}

// maxPointerTokens bounds how deep a spec.ignore pointer reaches. The
// fields people hand to others sit a few levels down (an env value of a
// container of a pod template is eight); every reconcile looks for each
// pointer in each object of the manifest, so depth is work.
const maxPointerTokens = 32

// ignoreRule is one spec.ignore rule, compiled.
type ignoreRule struct {
	target   v1alpha1.IgnoreTarget
	selector labels.Selector
	// ids are those of the rule's pointers in ignoreRules.paths.
	ids []int
}

// ignoreRules is spec.ignore, compiled: its rules, the distinct pointers
// they name, by id, and those pointers as a tree of their tokens. Rules may
// name 64 × 32 pointers, and every reconcile looks for those that apply in
// every object of the manifest: one walk of an object along the tree steps
// through a parent once for all the pointers below it, where a walk per
// pointer would step through it again for each (2,048 pointers 250 steps
// deep once took 2 s a reconcile).
type ignoreRules struct {
	rules []ignoreRule
	paths []pointer
	tree  *ignoreTree
}

// ignoreTree is a node of ignoreRules.tree: the pointer ending there, if
// any (id, else -1), and the tokens that lead further.
type ignoreTree struct {
	id       int
	children map[string]*ignoreTree
}

// add gives p an id in rs, the same for the same pointer, and returns it.
func (rs *ignoreRules) add(p pointer) int {
	if rs.tree == nil {
		rs.tree = &ignoreTree{id: -1}
	}
	n := rs.tree
	for _, t := range p {
		c, ok := n.children[t]
		if !ok {
			c = &ignoreTree{id: -1}
			if n.children == nil {
				n.children = map[string]*ignoreTree{}
			}
			n.children[t] = c
		}
		n = c
	}
	if n.id < 0 {
		n.id = len(rs.paths)
		rs.paths = append(rs.paths, p)
	}
	return n.id
}

// compileIgnore checks and compiles spec.ignore. The API server's schema
// refuses malformed pointers already; the checks here are those it cannot
// make, and a guard for objects it did not validate.
func compileIgnore(rules []v1alpha1.IgnoreRule) (*ignoreRules, []error) {
	out := &ignoreRules{}
	var errs []error
	for i, r := range rules {
		c := ignoreRule{target: r.Target, selector: labels.Everything()}
		if r.Target.LabelSelector != "" {
			sel, err := labels.Parse(r.Target.LabelSelector)
			if err != nil {
				errs = append(errs, fmt.Errorf("spec.ignore[%d].target.labelSelector: %w", i, err))
				continue
			}
			c.selector = sel
		}
		for j, s := range r.Paths {
			p, err := parsePointer(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("spec.ignore[%d].paths[%d]: %w", i, j, err))
				continue
			}
			if slices.ContainsFunc(protectedPaths, func(q pointer) bool { return len(p) <= len(q) && slices.Equal(p, q[:len(p)]) }) {
				errs = append(errs, fmt.Errorf("spec.ignore[%d].paths[%d]: %s holds the object's identity or Vidra's marks, which Vidra must set; name a field below it instead", i, j, s))
				continue
			}
			if len(p) > maxPointerTokens {
				errs = append(errs, fmt.Errorf("spec.ignore[%d].paths[%d]: the pointer is %d steps deep, more than %d; name a field nearer the top of the object", i, j, len(p), maxPointerTokens))
				continue
			}
			c.ids = append(c.ids, out.add(p))
		}
		out.rules = append(out.rules, c)
	}
	return out, errs
}

// selected returns which pointers of rs, by id, the rules give obj, an
// object of the manifest as it will be applied (namespace resolved); nil
// when none.
func (rs *ignoreRules) selected(obj *unstructured.Unstructured) []bool {
	var sel []bool
	gvk := obj.GroupVersionKind()
	for _, r := range rs.rules {
		t := r.target
		if len(r.ids) == 0 || (t.Kind != "" && t.Kind != gvk.Kind) || (t.Group != "" && t.Group != gvk.Group) ||
			(t.Name != "" && t.Name != obj.GetName()) || (t.Namespace != "" && t.Namespace != obj.GetNamespace()) ||
			!r.selector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		if sel == nil {
			sel = make([]bool, len(rs.paths))
		}
		for _, id := range r.ids {
			sel[id] = true
		}
	}
	return sel
}

// index returns the position token names in a list of n items. Only
// RFC 6901's form names one, "0" or digits without a leading zero: "01" or
// "+1" would name the same item as "1" here and another nowhere else (the
// walk of ignoreTree looks items up by their canonical token).
func index(token string, n int) (int, bool) {
	i, err := strconv.Atoi(token)
	if err != nil || i < 0 || i >= n || strconv.Itoa(i) != token {
		return 0, false
	}
	return i, true
}

// step returns the child of node that token names: a map's key, or a list's
// item by position.
func step(node any, token string) (any, bool) {
	switch n := node.(type) {
	case map[string]any:
		v, ok := n[token]
		return v, ok
	case []any:
		i, ok := index(token, len(n))
		if !ok {
			return nil, false
		}
		return n[i], true
	}
	return nil, false
}

// lookup returns the value at p in obj.
func lookup(obj map[string]any, p pointer) (any, bool) {
	var node any = obj
	for _, t := range p {
		var ok bool
		if node, ok = step(node, t); !ok {
			return nil, false
		}
	}
	return node, true
}

// set puts v at p in obj when the field's parent exists in obj.
func set(obj map[string]any, p pointer, v any) bool {
	if len(p) == 0 {
		return false
	}
	parent, ok := lookup(obj, p[:len(p)-1])
	if !ok {
		return false
	}
	m, ok := parent.(map[string]any)
	if !ok {
		return false
	}
	m[p[len(p)-1]] = v
	return true
}

// liveAt returns the value at p of live, where the positions in p are
// those of desired's lists: a list item is found in live by its name, since
// others may have added items (an injected sidecar) before it.
func liveAt(desired, live any, p pointer) (any, bool) {
	return newListLookups().liveAt(desired, live, p)
}

// liveAt is liveAt with the lists of live indexed by l, once for all the
// pointers of an apply: looked through for each, 2,048 ignored fields of a
// list of 20,000 items cost 0.7 s at every apply of the object.
func (l *listLookups) liveAt(desired, live any, p pointer) (any, bool) {
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
				// An item whose name is a string of that value is one
				// whose key {name: name} matches.
				key := value.FieldList{{Name: "name", Value: value.NewValueInterface(name)}}
				j, _, ok := l.items(liveList, fieldpath.PathElement{Key: &key}, func(item any) bool { n, ok := nameOf(item); return ok && n == name })
				if !ok || j < 0 {
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

func nameOf(item any) (string, bool) {
	m, ok := item.(map[string]any)
	if !ok {
		return "", false
	}
	n, ok := m["name"].(string)
	return n, ok
}

// ignored is what the ignore rules do to one object of the manifest.
type ignored struct {
	// sel tells, by id, which of the pointers of rules apply to the object.
	rules *ignoreRules
	sel   []bool
	// seeds are the manifest's values of the ignored fields it sets, in
	// the order of their pointers: given to the object when Vidra creates
	// it, and afterwards replaced by the live values, so that Vidra never
	// changes them nor lets them go (an apply without a field its manager
	// alone owns would remove it).
	seeds []seed
}

type seed struct {
	id    int
	path  pointer
	value any
}

// strip removes from obj, a copy the caller owns, the fields the rules
// give it, and returns what was there.
func (rs *ignoreRules) strip(obj *unstructured.Unstructured) ignored {
	sel := rs.selected(obj)
	if sel == nil {
		return ignored{}
	}
	ig := ignored{rules: rs, sel: sel}
	rs.tree.strip(obj.Object, sel, rs.paths, &ig)
	slices.SortFunc(ig.seeds, func(a, b seed) int { return a.id - b.id })
	return ig
}

// strip removes from node the selected fields below t. A field removed
// takes the fields below it along; a list item named by position stays, as
// removing it would shift its followers, and the fields below it are
// looked for.
func (t *ignoreTree) strip(node any, sel []bool, paths []pointer, ig *ignored) {
	visit := func(tok string, c *ignoreTree) {
		v, ok := step(node, tok)
		if !ok {
			return
		}
		if m, isMap := node.(map[string]any); isMap && c.id >= 0 && sel[c.id] {
			delete(m, tok)
			ig.seeds = append(ig.seeds, seed{id: c.id, path: paths[c.id], value: v})
			return
		}
		if len(c.children) > 0 {
			c.strip(v, sel, paths, ig)
		}
	}
	// Whichever is smaller of the node and the tokens is walked, so that
	// many pointers cost little in small objects, nor large objects with
	// few pointers. Keys are collected first: visit deletes from m.
	switch n := node.(type) {
	case map[string]any:
		if len(n) < len(t.children) {
			keys := make([]string, 0, len(n))
			for k := range n {
				keys = append(keys, k)
			}
			for _, k := range keys {
				if c, ok := t.children[k]; ok {
					visit(k, c)
				}
			}
			return
		}
	case []any:
		if len(n) < len(t.children) {
			for i := range n {
				tok := strconv.Itoa(i)
				if c, ok := t.children[tok]; ok {
					visit(tok, c)
				}
			}
			return
		}
	default:
		return
	}
	for tok, c := range t.children {
		visit(tok, c)
	}
}

// withIgnored returns obj with the ignored fields the manifest sets: their
// seeds when live is nil (a creation), else the values they have in live.
// It reports whether any value came from live, which makes the apply that
// sends it valid only at live's version.
func (ig ignored) withIgnored(obj, manifestObj map[string]any, live *unstructured.Unstructured) (fromLive bool) {
	var lists *listLookups
	for _, s := range ig.seeds {
		if live == nil {
			set(obj, s.path, s.value)
			continue
		}
		if lists == nil {
			lists = newListLookups()
		}
		if v, ok := lists.liveAt(manifestObj, live.Object, s.path); ok {
			set(obj, s.path, v)
			fromLive = true
		}
	}
	return fromLive
}

// pathIn converts p, with positions of desired's lists, to the path of the
// same field in set, a field set of the live object: a list item is the
// element of set whose key fields or value match desired's item. lists,
// when not nil, is shared by the calls on one set (see listLookups).
func pathIn(set *fieldpath.Set, desired any, p pointer, lists *listLookups) (fieldpath.Path, bool) {
	if lists == nil {
		lists = newListLookups()
	}
	var out fieldpath.Path
	for k, t := range p {
		list, isList := desired.([]any)
		if !isList {
			name := t
			out = append(out, fieldpath.PathElement{FieldName: &name})
			desired, _ = step(desired, t)
			if set != nil {
				set, _ = set.Children.Get(out[len(out)-1])
			}
			// A field of the set has its parents among the set's
			// children: without this one, no field below it is there.
			if set == nil && k < len(p)-1 {
				return nil, false
			}
			continue
		}
		i, ok := index(t, len(list))
		if !ok || set == nil {
			return nil, false
		}
		item := list[i]
		found, ok := lists.find(set, item, i, k == len(p)-1)
		if !ok {
			return nil, false
		}
		out = append(out, found)
		desired = item
		set, _ = set.Children.Get(found)
	}
	return out, true
}

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

// without returns set without the fields ig ignores and those below them.
// A pointer that ends at a list item ignores nothing: strip keeps the item
// in the object applied, and its fields are the manifest's as any others.
func without(set *fieldpath.Set, desired map[string]any, ig ignored) *fieldpath.Set {
	if ig.sel == nil || set.Empty() {
		return set
	}
	excl := &fieldpath.Set{}
	lists := newListLookups()
	for id, ok := range ig.sel {
		if !ok {
			continue
		}
		if fp, ok := pathIn(set, desired, ig.rules.paths[id], lists); ok && len(fp) > 0 && fp[len(fp)-1].FieldName != nil {
			excl.Insert(fp)
		}
	}
	if excl.Empty() {
		return set
	}
	return set.RecursiveDifference(excl)
}

// notIgnored returns set, a field set of p's live object, without the
// fields spec.ignore hands to others: theirs to change, never a hand edit
// to take back.
func (p *planned) notIgnored(set *fieldpath.Set) *fieldpath.Set {
	return without(set, p.obj.Object, p.ig)
}

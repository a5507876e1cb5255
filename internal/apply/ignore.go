// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

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

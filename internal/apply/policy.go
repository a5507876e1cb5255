package apply

import (
	"fmt"
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

// ignoreRule is one spec.ignore rule, compiled.
type ignoreRule struct {
	target   v1alpha1.IgnoreTarget
	selector labels.Selector
	paths    []pointer
}

// compileIgnore checks and compiles spec.ignore. The API server's schema
// refuses malformed pointers already; the checks here are those it cannot
// make, and a guard for objects it did not validate.
func compileIgnore(rules []v1alpha1.IgnoreRule) ([]ignoreRule, []error) {
	var out []ignoreRule
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
			c.paths = append(c.paths, p)
		}
		out = append(out, c)
	}
	return out, errs
}

// pathsFor returns the pointers the rules give obj, an object of the
// manifest as it will be applied (namespace resolved).
func pathsFor(rules []ignoreRule, obj *unstructured.Unstructured) []pointer {
	var out []pointer
	gvk := obj.GroupVersionKind()
	for _, r := range rules {
		t := r.target
		if (t.Kind != "" && t.Kind != gvk.Kind) || (t.Group != "" && t.Group != gvk.Group) ||
			(t.Name != "" && t.Name != obj.GetName()) || (t.Namespace != "" && t.Namespace != obj.GetNamespace()) ||
			!r.selector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		out = append(out, r.paths...)
	}
	return out
}

// step returns the child of node that token names: a map's key, or a list's
// item by position.
func step(node any, token string) (any, bool) {
	switch n := node.(type) {
	case map[string]any:
		v, ok := n[token]
		return v, ok
	case []any:
		i, err := strconv.Atoi(token)
		if err != nil || i < 0 || i >= len(n) {
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

// remove deletes the field at p from obj, which the caller owns. Only map
// keys are removed: a list item named by position stays, as removing it
// would shift its followers.
func remove(obj map[string]any, p pointer) (any, bool) {
	if len(p) == 0 {
		return nil, false
	}
	parent, ok := lookup(obj, p[:len(p)-1])
	if !ok {
		return nil, false
	}
	m, ok := parent.(map[string]any)
	if !ok {
		return nil, false
	}
	v, ok := m[p[len(p)-1]]
	delete(m, p[len(p)-1])
	return v, ok
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
	for _, t := range p {
		if list, ok := desired.([]any); ok {
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(list) {
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
	paths []pointer
	// seeds are the manifest's values of the ignored fields it sets: given
	// to the object when Vidra creates it, and afterwards replaced by the
	// live values, so that Vidra never changes them nor lets them go (an
	// apply without a field its manager alone owns would remove it).
	seeds map[string]any
}

// stripIgnored removes the ignored paths from obj, a copy the caller owns,
// and returns what was there.
func stripIgnored(obj *unstructured.Unstructured, paths []pointer) ignored {
	ig := ignored{paths: paths}
	for _, p := range paths {
		if v, ok := remove(obj.Object, p); ok {
			if ig.seeds == nil {
				ig.seeds = map[string]any{}
			}
			ig.seeds[p.String()] = v
		}
	}
	return ig
}

// withIgnored returns obj with the ignored fields the manifest sets: their
// seeds when live is nil (a creation), else the values they have in live.
// It reports whether any value came from live, which makes the apply that
// sends it valid only at live's version.
func (ig ignored) withIgnored(obj, manifestObj map[string]any, live *unstructured.Unstructured) (fromLive bool) {
	for _, p := range ig.paths {
		seed, ok := ig.seeds[p.String()]
		if !ok {
			continue
		}
		if live == nil {
			set(obj, p, seed)
			continue
		}
		if v, ok := liveAt(manifestObj, live.Object, p); ok {
			set(obj, p, v)
			fromLive = true
		}
	}
	return fromLive
}

// pathIn converts p, with positions of desired's lists, to the path of the
// same field in set, a field set of the live object: a list item is the
// element of set whose key fields or value match desired's item.
func pathIn(set *fieldpath.Set, desired any, p pointer) (fieldpath.Path, bool) {
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
			continue
		}
		i, err := strconv.Atoi(t)
		if err != nil || i < 0 || i >= len(list) || set == nil {
			return nil, false
		}
		item := list[i]
		var found *fieldpath.PathElement
		match := func(pe fieldpath.PathElement) {
			if found != nil {
				return
			}
			m, _ := item.(map[string]any)
			switch {
			case pe.Key != nil && m != nil && keyMatches(m, *pe.Key),
				pe.Value != nil && item != nil && value.Equals(value.NewValueInterface(item), *pe.Value),
				pe.Index != nil && *pe.Index == i:
				found = &pe
			}
		}
		set.Children.Iterate(match)
		if k == len(p)-1 {
			set.Members.Iterate(match)
		}
		if found == nil {
			return nil, false
		}
		out = append(out, *found)
		desired = item
		set, _ = set.Children.Get(*found)
	}
	return out, true
}

// without returns set without the fields at paths and below them.
func without(set *fieldpath.Set, desired map[string]any, paths []pointer) *fieldpath.Set {
	if len(paths) == 0 || set.Empty() {
		return set
	}
	excl := &fieldpath.Set{}
	for _, p := range paths {
		if fp, ok := pathIn(set, desired, p); ok {
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
	return without(set, p.obj.Object, p.ig.paths)
}

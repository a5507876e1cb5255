// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"strconv"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

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

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// unservedKind is the mapper's error for a kind the destination does not
// serve, with what the manifest most likely meant. It unwraps to the
// mapper's own error, so meta.IsNoMatchError still sees it.
type unservedKind struct {
	err        error
	suggestion string
}

func (e *unservedKind) Error() string { return e.err.Error() + ": " + e.suggestion }
func (e *unservedKind) Unwrap() error { return e.err }

// KindSuggestion is what the manifest most likely meant; the manifest
// package says it in place of asking about a CustomResourceDefinition.
func (e *unservedKind) KindSuggestion() string { return e.suggestion }

// SuggestKind wraps err, a no-match error for gvk, with what the manifest
// most likely meant among the kinds d serves, so that the manifest package
// says it; it returns err as it is when nothing served is close. What
// discovery could not list (an aggregated API down) is only not suggested.
func SuggestKind(d discovery.DiscoveryInterface, gvk schema.GroupVersionKind, err error) error {
	lists, _ := d.ServerPreferredResources()
	return newKindIndex(lists).suggest(gvk, err)
}

// kindIndex is the kinds a destination serves, by name and by group: what
// a suggestion looks at, without going through every kind served.
type kindIndex struct {
	byKind, byGroup map[string][]schema.GroupVersionKind
}

func newKindIndex(lists []*metav1.APIResourceList) *kindIndex {
	ix := &kindIndex{byKind: map[string][]schema.GroupVersionKind{}, byGroup: map[string][]schema.GroupVersionKind{}}
	for _, gvk := range servedKinds(lists) {
		ix.byKind[gvk.Kind] = append(ix.byKind[gvk.Kind], gvk)
		ix.byGroup[gvk.Group] = append(ix.byGroup[gvk.Group], gvk)
	}
	return ix
}

// suggest wraps err, a no-match error for gvk, as SuggestKind does.
func (ix *kindIndex) suggest(gvk schema.GroupVersionKind, err error) error {
	// The kinds of the same name, then those of the same group, each in
	// discovery's order: all that suggestKind would pick among all served.
	candidates := slices.Concat(ix.byKind[gvk.Kind], ix.byGroup[gvk.Group])
	if s := suggestKind(gvk, candidates); s != "" {
		return &unservedKind{err: err, suggestion: s}
	}
	return err
}

// servedKinds lists the kinds of resources (not subresources), in the order
// discovery gives them: groups and their versions by preference.
func servedKinds(lists []*metav1.APIResourceList) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, l := range lists {
		if l == nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if r.Kind == "" || strings.Contains(r.Name, "/") {
				continue
			}
			out = append(out, gv.WithKind(r.Kind))
		}
	}
	return out
}

// suggestKind says what a manifest that names want, a kind the destination
// does not serve, most likely meant, or "" when nothing served is close:
//   - the same kind in other versions of its group, or in other groups
//     ("it serves Deployment as apiVersion apps/v1": an old apiVersion, a
//     wrong group);
//   - a kind of the same group whose name is a slip of the keyboard away
//     (case, one or two letters, two letters swapped).
func suggestKind(want schema.GroupVersionKind, served []schema.GroupVersionKind) string {
	var sameKind, similar []string
	for _, gvk := range served {
		switch {
		case gvk.Kind == want.Kind:
			sameKind = appendOnce(sameKind, gvk.GroupVersion().String())
		case gvk.Group == want.Group && similarName(gvk.Kind, want.Kind):
			similar = appendOnce(similar, fmt.Sprintf("%q (apiVersion %q)", gvk.Kind, gvk.GroupVersion().String()))
		}
	}
	switch {
	case len(sameKind) > 0:
		return fmt.Sprintf("it serves %s as apiVersion %s", want.Kind, quotedList(sameKind, 3))
	case len(similar) > 0:
		return fmt.Sprintf("did you mean %s? If not, is its CustomResourceDefinition installed?", strings.Join(similar[:min(len(similar), 3)], " or "))
	}
	return ""
}

func appendOnce(l []string, s string) []string {
	if slices.Contains(l, s) {
		return l
	}
	return append(l, s)
}

func quotedList(l []string, most int) string {
	q := make([]string, 0, min(len(l), most))
	for _, s := range l[:min(len(l), most)] {
		q = append(q, fmt.Sprintf("%q", s))
	}
	return strings.Join(q, " or ")
}

// similarName reports whether two kind names differ by case only, or by at
// most one edit (two for names of six letters or more), a swap of two
// neighbouring letters counting as one.
func similarName(a, b string) bool {
	if strings.EqualFold(a, b) {
		return true
	}
	limit := 1
	if min(len(a), len(b)) >= 6 {
		limit = 2
	}
	if d := len(a) - len(b); d > limit || -d > limit {
		return false
	}
	return editDistance(strings.ToLower(a), strings.ToLower(b)) <= limit
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and swaps of neighbours, each costing one.
// Kind names are at most 63 characters, so the table is small.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

package controller

import (
	"encoding/json"
	"hash/fnv"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// isSubset reports whether every field desired sets has the same value in
// live. Fields desired does not set are ignored: other controllers and the
// API server's defaults own them. A null in desired asks for the field to be
// absent. Lists must have the same length, element by element, since server-
// side apply keeps the order of the lists it merges.
func isSubset(desired, live any) bool {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k, dv := range d {
			lv, present := l[k]
			if dv == nil {
				if present && lv != nil {
					return false
				}
				continue
			}
			if !present || !isSubset(dv, lv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(d) {
			return false
		}
		for i := range d {
			if !isSubset(d[i], l[i]) {
				return false
			}
		}
		return true
	case int64, float64, int, int32:
		return numberEqual(d, live)
	default:
		return desired == live
	}
}

func numberEqual(a, b any) bool {
	af, aok := toFloat(a)
	bf, bok := toFloat(b)
	return aok && bok && af == bf
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	}
	return 0, false
}

// hashObject fingerprints a desired object; encoding/json sorts map keys, so
// equal objects hash equally.
func hashObject(u *unstructured.Unstructured) uint64 {
	data, _ := json.Marshal(u.Object)
	h := fnv.New64a()
	_, _ = h.Write(data)
	return h.Sum64()
}

// handEdited returns the managers among overrides that own fields of live.
func handEdited(live *unstructured.Unstructured, overrides []string) []string {
	var found []string
	for _, e := range live.GetManagedFields() {
		if slices.Contains(overrides, e.Manager) && !slices.Contains(found, e.Manager) {
			found = append(found, e.Manager)
		}
	}
	return found
}

// takeOverManagedFields rewrites managedFields so that the fields owned by
// the hand-edit managers become Vidra's, in its Apply entry. The apply that
// follows then removes those of them the manifest does not set (server-side
// apply deletes fields their sole owner stops applying) and restores the rest.
// ok is false when there is nothing to take over.
func takeOverManagedFields(entries []metav1.ManagedFieldsEntry, overrides []string, manager, apiVersion string, now metav1.Time) (out []metav1.ManagedFieldsEntry, ok bool) {
	merged := map[string]any{}
	var keep []metav1.ManagedFieldsEntry
	vidraAt := -1
	for _, e := range entries {
		if slices.Contains(overrides, e.Manager) {
			ok = true
			if e.FieldsV1 != nil {
				var set map[string]any
				if json.Unmarshal(e.FieldsV1.Raw, &set) == nil {
					mergeFieldSets(merged, set)
				}
			}
			continue
		}
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			vidraAt = len(keep)
		}
		keep = append(keep, e)
	}
	if !ok {
		return entries, false
	}
	if vidraAt < 0 {
		keep = append(keep, metav1.ManagedFieldsEntry{
			Manager: manager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: apiVersion,
			Time: &now, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte("{}")},
		})
		vidraAt = len(keep) - 1
	}
	own := map[string]any{}
	if f := keep[vidraAt].FieldsV1; f != nil {
		_ = json.Unmarshal(f.Raw, &own)
	}
	mergeFieldSets(own, merged)
	raw, _ := json.Marshal(own)
	keep[vidraAt].FieldsV1 = &metav1.FieldsV1{Raw: raw}
	return keep, true
}

// mergeFieldSets adds the field set src (the FieldsV1 trie: keys such as
// "f:metadata" map to sub-sets, "." marks the node itself) into dst.
func mergeFieldSets(dst, src map[string]any) {
	for k, v := range src {
		sv, _ := v.(map[string]any)
		dv, exists := dst[k].(map[string]any)
		if !exists {
			dv = map[string]any{}
			dst[k] = dv
		}
		mergeFieldSets(dv, sv)
	}
}

// handEditsCovered reports whether every field the hand-edit managers own
// is one the manifest sets. Then a forced apply takes all of them back by
// itself, and the managedFields rewrite of takeOverManagedFields (two more
// requests) is not needed. Field sets with list elements (k:, v:, i: keys)
// are not mapped back to the manifest, so they count as not covered.
func handEditsCovered(live *unstructured.Unstructured, overrides []string, desired map[string]any) bool {
	for _, e := range live.GetManagedFields() {
		if !slices.Contains(overrides, e.Manager) {
			continue
		}
		if e.FieldsV1 == nil {
			continue
		}
		var set map[string]any
		if json.Unmarshal(e.FieldsV1.Raw, &set) != nil || !fieldsIn(set, desired) {
			return false
		}
	}
	return true
}

func fieldsIn(set map[string]any, obj map[string]any) bool {
	for k, v := range set {
		if k == "." {
			continue
		}
		name, ok := strings.CutPrefix(k, "f:")
		if !ok {
			return false
		}
		child, present := obj[name]
		if !present || child == nil {
			return false
		}
		sub, _ := v.(map[string]any)
		if len(sub) == 0 {
			continue
		}
		m, ok := child.(map[string]any)
		if !ok || !fieldsIn(sub, m) {
			return false
		}
	}
	return true
}

// handAddedKeys returns the labels and annotations that hand-edit managers
// added and the manifest does not set, as paths under metadata, when those
// are all the hand edits beyond the manifest's own fields. Removing them is
// then one small patch, where taking the fields over (takeOverManagedFields)
// costs a read, a managedFields rewrite and an apply.
func handAddedKeys(live *unstructured.Unstructured, overrides []string, desired map[string]any) (paths [][]string, ok bool) {
	for _, e := range live.GetManagedFields() {
		if !slices.Contains(overrides, e.Manager) || e.FieldsV1 == nil {
			continue
		}
		var set map[string]any
		if json.Unmarshal(e.FieldsV1.Raw, &set) != nil {
			return nil, false
		}
		if !uncoveredLeaves(set, desired, nil, &paths) {
			return nil, false
		}
	}
	for _, p := range paths {
		if len(p) != 3 || p[0] != "metadata" || (p[1] != "labels" && p[1] != "annotations") {
			return nil, false
		}
	}
	return paths, len(paths) > 0
}

// uncoveredLeaves appends the leaf paths of the field set that obj does not
// have; false means the set has list elements, which it cannot map.
func uncoveredLeaves(set map[string]any, obj map[string]any, at []string, out *[][]string) bool {
	for k, v := range set {
		if k == "." {
			continue
		}
		name, ok := strings.CutPrefix(k, "f:")
		if !ok {
			return false
		}
		path := append(slices.Clone(at), name)
		sub, _ := v.(map[string]any)
		child, present := obj[name]
		if len(sub) == 0 {
			if !present || child == nil {
				*out = append(*out, path)
			}
			continue
		}
		m, _ := child.(map[string]any)
		if !uncoveredLeaves(sub, m, path, out) {
			return false
		}
	}
	return true
}

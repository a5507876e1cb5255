// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"encoding/json"
	"hash/fnv"

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

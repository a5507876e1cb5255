// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// validate checks what Vidra itself needs of an object, reports every
// problem of it, and tells whether it is valid. It removes a null
// metadata.namespace, which would otherwise reach the API server as a field
// set to null.
func (p *parser) validate(m map[string]any, index int, pos position) bool {
	valid := true
	report := func(field, msg string, path ...string) {
		valid = false
		// Finding a field's line is a walk of its mapping: past the error
		// cap, 29,000 bad labels would cost one walk each, seconds in all.
		if p.full {
			return
		}
		p.invalid(index, lineOr(pos.fieldLine(path...), pos.line()), field, "%s", msg)
	}

	if apiVersion, msg := requiredString(m, "apiVersion"); msg != "" {
		report("apiVersion", msg, "apiVersion")
	} else if msg := checkAPIVersion(apiVersion); msg != "" {
		report("apiVersion", msg, "apiVersion")
	}
	if _, msg := requiredString(m, "kind"); msg != "" {
		report("kind", msg, "kind")
	}

	meta, ok := m["metadata"].(map[string]any)
	switch {
	case m["metadata"] == nil:
		report("metadata.name", "required")
		return false
	case !ok:
		report("metadata", "must be an object, not "+describe(m["metadata"]), "metadata")
		return false
	}

	if name, msg := requiredString(meta, "name"); msg != "" {
		if msg == "required" && meta["generateName"] != nil {
			msg = "required; generateName is not supported, as Vidra needs to know an object's name to prune it and to correct its drift"
		}
		report("metadata.name", msg, "metadata", "name")
	} else if msg := checkPathSegment(name); msg != "" {
		report("metadata.name", msg, "metadata", "name")
	}

	if ns, present := meta["namespace"]; present {
		switch ns := ns.(type) {
		case nil:
			delete(meta, "namespace")
		case string:
			if ns != "" {
				if msg := checkPathSegment(ns); msg != "" {
					report("metadata.namespace", msg, "metadata", "namespace")
				}
			}
		default:
			report("metadata.namespace", "must be a string, not "+describe(ns), "metadata", "namespace")
		}
	}

	for _, field := range []string{"labels", "annotations"} {
		for _, pr := range checkStringMap(meta[field]) {
			if pr.key == nil {
				report("metadata."+field, pr.msg, "metadata", field)
				continue
			}
			report(joinKey("metadata."+field, *pr.key), pr.msg, "metadata", field, *pr.key)
		}
	}
	if a, ok := meta["annotations"].(map[string]any); ok {
		for _, pr := range checkPolicies(a) {
			report(joinKey("metadata.annotations", *pr.key), pr.msg, "metadata", "annotations", *pr.key)
		}
	}
	return valid
}

// policyPrefix is the prefix of the annotations that set an object's
// policy in a manifest.
const policyPrefix = "vidra.infrahub.operators.com/"

// policyValues are the values each policy annotation takes. A typo in a
// key or a value must be an error: silently ignored, it would let an
// object Vidra was told to keep be pruned.
var policyValues = map[string][]string{
	"apply": {"IfNotPresent", "Ignore"},
	"prune": {"disabled", "enabled"},
	"force": {"enabled", "disabled"},
	// requested-at asks a VidraResource for a reconcile; a manifest may
	// hold VidraResources.
	"requested-at": nil,
}

// checkPolicies returns the problems of the policy annotations among a, in
// key order.
func checkPolicies(a map[string]any) []mapProblem {
	var problems []mapProblem
	for k, v := range a {
		name, ok := strings.CutPrefix(k, policyPrefix)
		if !ok {
			continue
		}
		values, known := policyValues[name]
		s, _ := v.(string)
		switch {
		case !known:
			problems = append(problems, mapProblem{key: &k, msg: "unknown Vidra annotation; the known ones are " +
				policyPrefix + "apply (IfNotPresent or Ignore), " + policyPrefix + "prune (disabled) and " + policyPrefix + "force (enabled)"})
		case values != nil && !slices.Contains(values, s):
			problems = append(problems, mapProblem{key: &k, msg: fmt.Sprintf("%q is not a value of this annotation: want %s", s, strings.Join(values, " or "))})
		}
	}
	sort.Slice(problems, func(i, j int) bool { return *problems[i].key < *problems[j].key })
	return problems
}

// requiredString returns m[key] if it is a non-empty string, else a message
// saying what is wrong with it.
func requiredString(m map[string]any, key string) (string, string) {
	switch v := m[key].(type) {
	case nil:
		return "", "required"
	case string:
		if v == "" {
			return "", "required"
		}
		return v, ""
	default:
		return "", "must be a string, not " + describe(v)
	}
}

// checkAPIVersion rejects what schema.ParseGroupVersion lets through but no
// server serves: an empty version ("apps/") or an empty group ("/v1").
func checkAPIVersion(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || gv.Version == "" || (strings.Contains(apiVersion, "/") && gv.Group == "") {
		return strconv.Quote(apiVersion) + ` is not a valid apiVersion: want "version" (such as "v1") or "group/version" (such as "apps/v1")`
	}
	return ""
}

// checkPathSegment rejects names no kind accepts, because the API server uses
// names as segments of URL paths. They would also break the
// "namespace/name" keys Vidra tracks objects by.
func checkPathSegment(name string) string {
	switch {
	case name == "." || name == "..":
		return strconv.Quote(name) + " is not a valid name"
	case strings.Contains(name, "/"):
		return strconv.Quote(name) + ` is not a valid name: it must not contain "/"`
	case strings.Contains(name, "%"):
		return strconv.Quote(name) + ` is not a valid name: it must not contain "%"`
	}
	return ""
}

// mapProblem is a problem of a map: of the map itself when key is nil, else
// of the value of *key.
type mapProblem struct {
	key *string
	msg string
}

// checkStringMap checks that v is null or an object of strings, and returns
// its problems in key order.
func checkStringMap(v any) []mapProblem {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return []mapProblem{{msg: "must be an object of strings, not " + describe(v)}}
	}
	var problems []mapProblem
	for k, val := range m {
		if _, ok := val.(string); !ok {
			problems = append(problems, mapProblem{key: &k, msg: "must be a string, not " + describe(val)})
		}
	}
	sort.Slice(problems, func(i, j int) bool { return *problems[i].key < *problems[j].key })
	return problems
}

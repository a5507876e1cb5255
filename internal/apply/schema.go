// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vidra-operator/vidra/internal/wording"
)

// typedPatchRefusal starts the API server's refusal of an apply whose object
// does not fit the kind's schema: a field the kind does not have, a value of
// the wrong type, two list entries with the same key. The API server answers
// it as an internal error (500), so without a look at the message it would
// pass for a fault of the server and be retried as one.
const typedPatchRefusal = "failed to create typed patch object"

// schemaProblem is one line of such a refusal: the field's path as the API
// server writes it (`.spec.template.spec.containers[name="web"].port`) and
// what is wrong with it.
var schemaProblem = regexp.MustCompile(`^(\.\S*): (.+)$`)

var (
	expectedType = regexp.MustCompile(`^expected (numeric \(int or float\)|string|boolean|list|map|any scalar), got `)
	duplicateKey = regexp.MustCompile(`^duplicate entries for key \[(.*)\]$`)
)

// builtinGroups are the API groups the API server serves itself. The
// schema of their kinds changes only with the server's version, so an
// object that does not fit it will not fit on a retry; the schema of a
// custom resource changes with its CustomResourceDefinition, which may be
// updated in the same pass.
var builtinGroups = map[string]bool{
	"": true, "apps": true, "batch": true, "autoscaling": true, "policy": true,
	"admissionregistration.k8s.io": true, "apiextensions.k8s.io": true, "apiregistration.k8s.io": true,
	"authentication.k8s.io": true, "authorization.k8s.io": true,
	"certificates.k8s.io": true, "coordination.k8s.io": true, "discovery.k8s.io": true, "events.k8s.io": true,
	"flowcontrol.apiserver.k8s.io": true, "internal.apiserver.k8s.io": true, "networking.k8s.io": true,
	"node.k8s.io": true, "rbac.authorization.k8s.io": true, "resource.k8s.io": true, "scheduling.k8s.io": true,
	"storage.k8s.io": true, "storagemigration.k8s.io": true,
}

// SchemaRefusal rewrites the API server's refusal of an apply of obj by
// the kind's schema into what a person fixes in the manifest, and reports
// whether err is such a refusal. line is where obj starts in its manifest,
// 0 when unknown. Problems it cannot read are kept in the server's words.
// The error unwraps to err.
func SchemaRefusal(obj *unstructured.Unstructured, line int, err error) (error, bool) {
	if !apierrors.IsInternalError(err) {
		return nil, false
	}
	msg := err.Error()
	i := strings.Index(msg, typedPatchRefusal)
	if i < 0 {
		return nil, false
	}
	// What follows is "(ns/name; apps/v1, Kind=Deployment): " and the
	// problems, one, or several after "errors:", a line each.
	rest := msg[i+len(typedPatchRefusal):]
	if j := strings.Index(rest, "): "); j >= 0 {
		rest = rest[j+3:]
	}
	rest = strings.TrimPrefix(rest, "errors:")
	kind := obj.GetAPIVersion() + " " + obj.GetKind()

	var unknown, said []string
	for line := range strings.SplitSeq(rest, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		m := schemaProblem.FindStringSubmatch(line)
		if m == nil {
			said = append(said, line)
			continue
		}
		path, problem := m[1], m[2]
		switch {
		case problem == "field not declared in schema":
			unknown = append(unknown, path)
		case expectedType.MatchString(problem):
			said = append(said, wrongType(obj.Object, path, problem))
		case duplicateKey.MatchString(problem):
			key := duplicateKey.FindStringSubmatch(problem)[1]
			said = append(said, fmt.Sprintf("%s has more than one entry with %s: each entry needs its own", path, key))
		default:
			said = append(said, line)
		}
	}
	switch len(unknown) {
	case 0:
	case 1:
		said = append([]string{fmt.Sprintf("%s has no field %s: check its spelling and indentation", kind, unknown[0])}, said...)
	default:
		said = append([]string{fmt.Sprintf("%s has no fields %s: check their spelling and indentation", kind, strings.Join(unknown, ", "))}, said...)
	}
	where := ""
	if line > 0 {
		where = fmt.Sprintf(" (the object starts at line %d)", line)
	}
	return &schemaRefusal{msg: strings.Join(said, "; ") + where, err: err}, true
}

// schemaRefusal is the refusal in a person's words; it unwraps to the API
// server's error.
type schemaRefusal struct {
	msg string
	err error
}

func (e *schemaRefusal) Error() string { return e.msg }
func (e *schemaRefusal) Unwrap() error { return e.err }

// wrongType says which type the field wants and what the manifest gave,
// with the usual cause when there is one: a number or a boolean quoted, or
// a value that must be quoted left bare.
func wrongType(obj map[string]any, path, problem string) string {
	var want string
	switch expectedType.FindStringSubmatch(problem)[1] {
	case "numeric (int or float)":
		want = "a number"
	case "string":
		want = "a string"
	case "boolean":
		want = "true or false"
	case "list":
		want = "a list"
	case "map":
		want = "an object"
	default:
		want = "a single value"
	}
	v, ok := lookupPath(obj, path)
	if !ok {
		return fmt.Sprintf("%s must be %s: %s", path, want, problem)
	}
	s := fmt.Sprintf("%s must be %s, not %s", path, want, describe(v))
	switch str, isString := v.(string); {
	case want == "a number" && isString && isNumber(str), want == "true or false" && isString && (str == "true" || str == "false"):
		s += ": write it without quotes"
	case want == "a string" && !isString && isScalar(v):
		s += ": put it in quotes"
	case want == "a list" && isMap(v):
		s += `: start each entry with "- "`
	}
	return s
}

func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return "the string " + strconv.Quote(truncateValue(v))
	case bool:
		return strconv.FormatBool(v)
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	if _, ok := toFloat(v); ok {
		return fmt.Sprintf("the number %v", v)
	}
	return fmt.Sprintf("%T", v)
}

func truncateValue(s string) string { return wording.Cut(s, 40, "...") }

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

func isScalar(v any) bool {
	_, isBool := v.(bool)
	_, isNumber := toFloat(v)
	return isBool || isNumber
}

func isMap(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}

// lookupPath finds the value at path in obj. The path is written as the
// API server's field paths are: ".name" for a field, "[3]" for a list
// index, `[name="web",port=80]` for the entry of a keyed list, `[="v"]` for
// the entry of a set. Keys the entry leaves out are taken as defaulted.
// Field names with dots (label keys) make a path ambiguous: lookupPath
// reports false then, as for any path it cannot follow.
func lookupPath(obj any, path string) (any, bool) {
	cur := obj
	for path != "" {
		switch path[0] {
		case '.':
			end := strings.IndexAny(path[1:], ".[")
			if end < 0 {
				end = len(path) - 1
			}
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[path[1:1+end]]; !ok {
				return nil, false
			}
			path = path[1+end:]
		case '[':
			end := closingBracket(path)
			if end < 0 {
				return nil, false
			}
			l, ok := cur.([]any)
			if !ok {
				return nil, false
			}
			if cur, ok = listEntry(l, path[1:end]); !ok {
				return nil, false
			}
			path = path[end+1:]
		default:
			return nil, false
		}
	}
	return cur, true
}

// closingBracket returns the index of the "]" that closes the "[" path
// starts with, or -1.
func closingBracket(path string) int {
	end := -1
	unquoted(path, func(i int, c byte) bool {
		if c == ']' {
			end = i
			return false
		}
		return true
	})
	return end
}

// unquoted calls f with each byte of s outside double-quoted strings,
// which may hold escaped quotes, until f returns false.
func unquoted(s string, f func(i int, c byte) bool) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && !f(i, c):
			return
		}
	}
}

func listEntry(l []any, sel string) (any, bool) {
	if n, err := strconv.Atoi(sel); err == nil {
		if n < 0 || n >= len(l) {
			return nil, false
		}
		return l[n], true
	}
	if v, ok := strings.CutPrefix(sel, "="); ok {
		var want any
		if json.Unmarshal([]byte(v), &want) != nil {
			return nil, false
		}
		for _, e := range l {
			if sameScalar(e, want) {
				return e, true
			}
		}
		return nil, false
	}
	keys := map[string]any{}
	for _, kv := range splitKeys(sel) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, false
		}
		var want any
		if json.Unmarshal([]byte(v), &want) != nil {
			return nil, false
		}
		keys[k] = want
	}
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		match, present := true, 0
		for k, want := range keys {
			got, ok := m[k]
			if !ok {
				continue
			}
			present++
			if !sameScalar(got, want) {
				match = false
				break
			}
		}
		if match && present > 0 {
			return e, true
		}
	}
	return nil, false
}

// splitKeys splits `name="a,b",port=80` on the commas outside quotes.
func splitKeys(s string) []string {
	var out []string
	start := 0
	unquoted(s, func(i int, c byte) bool {
		if c == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
		return true
	})
	return append(out, s[start:])
}

func sameScalar(a, b any) bool {
	if _, ok := toFloat(a); ok {
		return numberEqual(a, b)
	}
	switch a.(type) {
	case string, bool, nil:
		return a == b
	}
	return false
}

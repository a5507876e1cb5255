// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package preview

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// noise are the metadata fields that every write changes or that only the
// API server sets; a preview that showed them would show a change for
// every object.
var noise = []string{"managedFields", "resourceVersion", "generation", "creationTimestamp", "uid", "selfLink", "deletionGracePeriodSeconds"}

// Clean returns a copy of u without the fields a preview leaves out: the
// status (the object's controller writes it, never an apply) and the
// metadata that changes on every write.
func Clean(u *unstructured.Unstructured) *unstructured.Unstructured {
	if u == nil {
		return nil
	}
	c := u.DeepCopy()
	delete(c.Object, "status")
	for _, f := range noise {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	return c
}

// YAML returns the cleaned object as YAML, keys sorted, "" for nil.
func YAML(u *unstructured.Unstructured) (string, error) {
	if u == nil {
		return "", nil
	}
	j, err := json.Marshal(Clean(u).Object)
	if err != nil {
		return "", fmt.Errorf("encode %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	b, err := yaml.JSONToYAML(EscapeC1(j))
	if err != nil {
		return "", fmt.Errorf("encode %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return string(b), nil
}

// EscapeC1 writes the C1 controls (U+0080 to U+009F) of JSON text as
// escapes. JSON leaves them as they are, and the YAML reader that turns
// JSON into YAML refuses them in its input: an object holding one, which
// anyone who may write the object can put in a value, could not be shown.
// Read from an escape, the YAML writer quotes and escapes them in turn.
// They are only ever in strings: JSON's own syntax is ASCII.
func EscapeC1(j []byte) []byte {
	return EscapeRunes(j, func(r rune) bool { return r >= 0x80 && r <= 0x9f })
}

// EscapeRunes writes the runes of JSON text that escape reports as JSON
// escapes: the same value, written otherwise. Only strings can hold a rune
// past ASCII, so escape must report none of JSON's own syntax.
func EscapeRunes(j []byte, escape func(rune) bool) []byte {
	var out []byte
	for i := 0; i < len(j); {
		r, n := utf8.DecodeRune(j[i:])
		if !escape(r) {
			if out != nil {
				out = append(out, j[i:i+n]...)
			}
			i += n
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(j)+16), j[:i]...)
		}
		out = fmt.Appendf(out, `\u%04x`, r)
		i += n
	}
	if out == nil {
		return j
	}
	return out
}

// UnifiedDiff returns the unified diff (three lines of context) from
// before to after, labelled with the names given; "" when they are equal.
func UnifiedDiff(before, after, fromName, toName string) (string, error) {
	if before == after {
		return "", nil
	}
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A:        splitLines(before),
		B:        splitLines(after),
		FromFile: fromName,
		ToFile:   toName,
		Context:  3,
	})
}

// splitLines splits s into lines that keep their "\n", as difflib wants
// them; a last line without one gets one, so that it diffs like the rest.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] += "\n"
	}
	return lines
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"errors"
	"strings"
	"testing"
)

func TestDocumentJSON(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"YAML", "a: 1\nb: [true, yes, null, 1.5, \"x\"]\nc: !!binary aGk=\n", `{"a":1,"b":[true,"yes",null,1.5,"x"],"c":"aGk="}`},
		{"aliases and merge keys", "base: &b {x: 1}\nuse: *b\nmerged: {<<: *b, y: 2}\n", `{"base":{"x":1},"merged":{"x":1,"y":2},"use":{"x":1}}`},
		{"JSON as written", " {\"a\": [1, 2]}\n", `{"a": [1, 2]}`},
		{"JSON-looking YAML", "{a: 1}", `{"a":1}`},
		{"empty", "# nothing\n---\n", `null`},
		{"byte order mark", "\uFEFFa: 1\n", `{"a":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DocumentJSON(tc.text, 1000)
			if err != nil || string(got) != tc.want {
				t.Errorf("DocumentJSON(%q) = %s, %v; want %s", tc.text, got, err, tc.want)
			}
		})
	}
}

func TestDocumentJSONRefuses(t *testing.T) {
	tests := []struct {
		name, text, want string
		reason           string
	}{
		{"nodes", "a: [" + strings.Repeat("0,", 400) + "0]\n", "line 1: holds more than 1000 nodes", ReasonManifestTooLarge},
		{"JSON nodes", `{"a":[` + strings.Repeat("0,", 400) + "0]}", "holds more than 1000 nodes", ReasonManifestTooLarge},
		{"aliases", "a: &a \"" + strings.Repeat("x", 9000) + "\"\nb: [*a, *a, *a]\n", "aliases expand to too much data (over 25409 nodes and bytes for this document", ReasonInvalidManifest},
		{"syntax", "a: [\n", "invalid YAML", ReasonInvalidManifest},
		{"two documents", "a: 1\n---\nb: 2\n", "line 2: a second YAML document", ReasonInvalidManifest},
		{"duplicate JSON key", `{"a":1,"a":2}`, "a: this key is given twice", ReasonInvalidManifest},
		{"invalid UTF-8", "a: \xff\n", "not valid UTF-8", ReasonInvalidManifest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DocumentJSON(tc.text, 1000)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want one saying %q", err, tc.want)
			}
			var e *Error
			var list ErrorList
			switch {
			case errors.As(err, &e):
			case errors.As(err, &list) && len(list) > 0:
				e = list[0]
			default:
				t.Fatalf("err is a %T, not an *Error or ErrorList", err)
			}
			if e.Reason != tc.reason {
				t.Errorf("reason %s; want %s", e.Reason, tc.reason)
			}
		})
	}
}

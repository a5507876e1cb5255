// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wording

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	for _, tt := range []struct {
		name, s string
		n       int
		end     string
		want    string
	}{
		{"fits", "abc", 3, "...", "abc"},
		{"ASCII over", "abcdef", 5, "...", "ab..."},
		{"inside a character", strings.Repeat("é", 5), 6, "...", "é..."},
		{"at a character boundary", strings.Repeat("é", 5), 7, "...", "éé..."},
		{"ellipsis of three bytes", strings.Repeat("é", 5), 6, "…", "é…"},
		{"four-byte character", "😀😀", 7, "...", "😀..."},
		{"inside a four-byte character", "😀😀", 6, "...", "..."},
		{"invalid bytes replaced", "a\xffb", 10, "...", "a\uFFFDb"},
		{"a run of invalid bytes is one replacement", "a\xff\xfe\xfdb", 10, "...", "a\uFFFDb"},
		{"cut after the replacement", "\xff" + strings.Repeat("x", 10), 8, "...", "\uFFFDxx..."},
		{"nothing left but the end", "abcdef", 3, "...", "..."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Cut(tt.s, tt.n, tt.end)
			if got != tt.want {
				t.Errorf("Cut(%q, %d, %q) = %q, want %q", tt.s, tt.n, tt.end, got, tt.want)
			}
			if len(got) > max(tt.n, len(tt.end)) || !utf8.ValidString(got) {
				t.Errorf("Cut(%q, %d, %q) = %q: %d bytes, valid UTF-8 %v", tt.s, tt.n, tt.end, got, len(got), utf8.ValidString(got))
			}
		})
	}
}

// What Cut returns survives a JSON round trip unchanged, wherever the cut
// falls: the property a status compared with its stored copy needs.
func TestCutSurvivesJSON(t *testing.T) {
	s := "aé€😀\xff" + strings.Repeat("é€😀", 20)
	for n := 3; n <= len(s)+3; n++ {
		for _, end := range []string{"...", "…"} {
			got := Cut(s, n, end)
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var back string
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back != got {
				t.Fatalf("Cut(s, %d, %q) = %q reads back from JSON as %q", n, end, got, back)
			}
		}
	}
}

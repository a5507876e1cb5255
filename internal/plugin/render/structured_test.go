// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// escapedRunes are the runes every format escapes: each of categories Cc
// (C0, DEL, C1), Cf (the bidirectional controls, the zero-width ones,
// U+FEFF, the tag characters...), Zl and Zp.
func escapedRunes() []rune {
	var runes []rune
	for _, table := range []*unicode.RangeTable{unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp} {
		for _, r16 := range table.R16 {
			for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
				runes = append(runes, r)
			}
		}
		for _, r32 := range table.R32 {
			for r := rune(r32.Lo); r <= rune(r32.Hi); r += rune(r32.Stride) {
				runes = append(runes, r)
			}
		}
	}
	return runes
}

// checkNoEscaped fails t if out holds an Escaped rune other than '\n'
// and '\t'.
func checkNoEscaped(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && r != '\t' && Escaped(r) {
			t.Errorf("%s prints %U:\n%q", what, r, out)
			return
		}
	}
}

// TestStructuredFormatsEscapeEveryClassAndReadBack: JSON and YAML hold
// every class as an escape, in keys and values, and read back as the
// value written.
func TestStructuredFormatsEscapeEveryClassAndReadBack(t *testing.T) {
	runes := escapedRunes()
	for _, r := range []rune{0x1b, '\r', 0x7f, 0x9b, 0x202e, 0x2066, 0x200b, 0xfeff, 0x2060, 0x2028, 0x2029, 0xe0001} {
		if !slices.Contains(runes, r) {
			t.Fatalf("%U is not among the runes tested", r)
		}
	}
	for _, r := range runes {
		t.Run(fmt.Sprintf("%U", r), func(t *testing.T) {
			value := `a"\` + string(r) + "b\nc"
			in := map[string]any{"key" + string(r): value, "plain": "x", "list": []any{value, 1.5, int64(1) << 60}}
			j, err := json.MarshalIndent(in, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			out := EscapeJSON(j)
			checkNoEscaped(t, "JSON", string(out))
			var back map[string]any
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatalf("the JSON is not JSON: %v\n%s", err, out)
			}
			wantJSON := map[string]any{}
			_ = json.Unmarshal(j, &wantJSON)
			if diff := cmp.Diff(wantJSON, back); diff != "" {
				t.Errorf("JSON reads back otherwise (-want +got):\n%s", diff)
			}

			y, err := JSONToYAML(j)
			if err != nil {
				t.Fatal(err)
			}
			checkNoEscaped(t, "YAML", string(y))
			back = nil
			if err := yaml.Unmarshal(y, &back); err != nil {
				t.Fatalf("the YAML is not YAML: %v\n%s", err, y)
			}
			if diff := cmp.Diff(wantJSON, back); diff != "" {
				t.Errorf("YAML reads back otherwise (-want +got):\n%s\n%s", diff, y)
			}
		})
	}
}

func TestJSONToYAMLWritesPlainValuesAsKubectlDoes(t *testing.T) {
	j := []byte(`{"b": "two\nlines", "a": [1, "x"], "num": 12345678901234567890, "vidraescaped0x": "` + "\u202e" + `"}`)
	y, err := JSONToYAML(j)
	if err != nil {
		t.Fatal(err)
	}
	// A string that happens to be a token is not taken for one.
	want := "a:\n- 1\n- x\nb: |-\n  two\n  lines\nnum: 12345678901234567890\nvidraescaped0x: \"\\u202e\"\n"
	if diff := cmp.Diff(want, string(y)); diff != "" {
		t.Errorf("YAML (-want +got):\n%s", diff)
	}
	// A long key is written as an explicit key: a simple one may be at
	// most 1024 runes long.
	long := strings.Repeat("\u202e", 300)
	j, _ = json.Marshal(map[string]map[string]string{"m": {long: "v", "k": long}})
	y, err = JSONToYAML(j)
	var back map[string]map[string]string
	if err != nil || yaml.Unmarshal(y, &back) != nil || back["m"][long] != "v" || back["m"]["k"] != long {
		t.Errorf("YAML of a long key does not read back: %v\n%s", err, y)
	}
	plain := []byte(`{"a": "b"}`)
	y, err = JSONToYAML(plain)
	if err != nil || string(y) != "a: b\n" {
		t.Errorf("YAML of plain JSON: %q, %v", y, err)
	}
	if got := EscapeJSON(plain); &got[0] != &plain[0] {
		t.Error("EscapeJSON copied JSON with nothing to escape")
	}
}

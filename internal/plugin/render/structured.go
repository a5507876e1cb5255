// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// EscapeJSON returns JSON text with every Escaped rune that its encoder
// left as it is (DEL, the C1 controls, the format characters; Go's encoder
// escapes C0 and U+2028, U+2029 itself) written as a \uXXXX escape, a rune
// past U+FFFF as its UTF-16 pair: the same value for any JSON reader, and
// nothing a terminal acts on. A rune past ASCII is only ever in a string,
// and JSON's own syntax holds no DEL, so no escape lands outside one. j is
// returned as it is when it holds nothing to escape.
func EscapeJSON(j []byte) []byte {
	var out []byte
	done := 0
	for i := 0; i < len(j); {
		r, n := utf8.DecodeRune(j[i:])
		if r < 0x7f || !Escaped(r) {
			i += n
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(j)+32)
		}
		out = append(out, j[done:i]...)
		if r > 0xffff {
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += n
		done = i
	}
	if out == nil {
		return j
	}
	return append(out, j[done:]...)
}

// JSONToYAML turns JSON text into YAML as kubectl's -o yaml does
// (sigs.k8s.io/yaml: block style, keys sorted), except that a string, key
// or value, holding a rune a terminal would act on (Escaped, but for '\n'
// and '\t') is written as a double-quoted scalar with that rune as a \u
// escape. The YAML writer would write the format characters and the
// separators as they are, even quoted, and refuses C1 controls: the YAML
// printed is safe on a terminal and reads back as the very same value.
//
// It does so by writing each such string as a token the YAML writer prints
// as it is, then the token as the quoted scalar. A token is a word no
// string of j holds. A key written so sorts by its token, not by itself.
func JSONToYAML(j []byte) ([]byte, error) {
	if !mayHoldEscaped(j) {
		return yaml.JSONToYAML(j)
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	prefix := "vidraescaped"
	for holds(v, prefix) {
		prefix += "z"
	}
	t := tokens{prefix: prefix}
	v = t.replace(v)
	if len(t.quoted) == 0 {
		return yaml.JSONToYAML(j)
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return nil, err
	}
	return []byte(strings.NewReplacer(t.quoted...).Replace(string(y))), nil
}

// mayHoldEscaped tells whether JSON text may hold a string with an
// Escaped rune: a rune past ASCII, DEL, or any escape (Go's encoder writes
// C0 controls and the separators as escapes).
func mayHoldEscaped(j []byte) bool {
	for _, c := range j {
		if c >= 0x7f || c == '\\' {
			return true
		}
	}
	return false
}

// tokens stands a token for each string to quote.
type tokens struct {
	prefix string
	// quoted holds token, quoted scalar pairs, for strings.NewReplacer.
	quoted []string
}

// replace returns v with each string to quote, keys too, as its token.
func (t *tokens) replace(v any) any {
	switch v := v.(type) {
	case string:
		return t.token(v, false)
	case []any:
		for i := range v {
			v[i] = t.replace(v[i])
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[t.token(k, true)] = t.replace(e)
		}
		return out
	}
	return v
}

// simpleKey is the longest key the YAML writer writes as "key: value";
// past it, "? key" on a line of its own, where a key may be of any
// length (a reader takes a simple key of at most 1024 runes).
const simpleKey = 128

func (t *tokens) token(s string, key bool) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r != '\n' && r != '\t' && Escaped(r) }) {
		return s
	}
	// The 'x' after the number keeps one token from being the start of
	// another.
	tok := t.prefix + strconv.Itoa(len(t.quoted)/2) + "x"
	q := quoteYAML(s)
	if key && len(q) > simpleKey-32 {
		// A token as long as the quoted key would be makes the writer
		// write the key explicitly, as it would the key itself.
		tok += strings.Repeat("x", simpleKey+1-len(tok))
	}
	t.quoted = append(t.quoted, tok, q)
	return tok
}

// holds tells whether a string of v, key or value, holds word.
func holds(v any, word string) bool {
	switch v := v.(type) {
	case string:
		return strings.Contains(v, word)
	case []any:
		return slices.ContainsFunc(v, func(e any) bool { return holds(e, word) })
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if strings.Contains(k, word) || holds(v[k], word) {
				return true
			}
		}
	}
	return false
}

// quoteYAML writes s as a YAML double-quoted scalar, on one line: the
// Escaped runes, '\n', '\t' and the runes YAML may not hold as they are
// (U+FFFE, U+FFFF) as \u escapes, '"' and '\\' escaped, the rest as it is.
func quoteYAML(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r > 0xffff && Escaped(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		case Escaped(r) || r == 0xfffe || r == 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

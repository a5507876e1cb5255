// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Safe returns s with every rune a terminal could act on, or that changes
// how the text around it reads, written as an escape: the control
// characters (C0 with ESC and CR, DEL and C1: escape sequences, a carriage
// return, U+009B, which many terminals take for a CSI), the format
// characters of Unicode category Cf (the bidirectional overrides,
// embeddings, isolates and marks, the zero-width characters, U+FEFF, the
// tag characters) and the line and paragraph separators (Zl, Zp). An
// escape is Go's: `\x1b`, `\r`, `\u202e`, `\U000e0001`; a byte that is not
// UTF-8 is `\x9b`. The rest, printable text of any script, is kept, and so
// is a backslash: the escapes are for a person to read, and a person sees
// that `\u202e` is there, where a '?' would hide which rune it was.
//
// What kubectl vidra prints comes from API servers and from objects that
// anyone with a namespace may write: messages, names, annotations, Events.
// Every such value goes through Safe, or SafeText or OneLine, before it is
// printed; the plugin's own colours are added after. -o json and -o yaml
// write the same runes as the escapes of their own syntax (EscapeJSON,
// JSONToYAML). s is returned as it is, without allocating, when it holds
// nothing to escape.
func Safe(s string) string {
	return escape(s, func(rune) bool { return true })
}

// SafeText is Safe for text of several lines, such as an error or a diff:
// it keeps '\n' and '\t' and escapes the rest as Safe does.
func SafeText(s string) string {
	return escape(s, func(r rune) bool { return r != '\n' && r != '\t' })
}

// OneLine keeps a message on one line, or one table cell: each run of
// white space (newlines and the separators too) becomes one space, and the
// rest goes through Safe.
func OneLine(s string) string {
	return Safe(strings.Join(strings.Fields(s), " "))
}

// Escaped tells the runes every format of kubectl vidra writes as an
// escape: the controls (Cc: C0, DEL, C1), the format characters (Cf) and
// the line and paragraph separators (Zl, Zp).
func Escaped(r rune) bool {
	if r < utf8.RuneSelf {
		return r < ' ' || r == 0x7f
	}
	// Cf holds the bidirectional controls (U+061C, U+200E, U+200F,
	// U+202A–U+202E, U+2066–U+2069), the zero-width ones (U+200B–U+200D,
	// U+2060, U+FEFF) and the other invisible format characters; Zl and
	// Zp are U+2028 and U+2029.
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// escape writes the runes of s that are Escaped, and that keep allows to
// escape, as Go escapes, and each byte that is not UTF-8 as \xNN.
func escape(s string, keep func(rune) bool) string {
	var b strings.Builder
	done := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		bad := r == utf8.RuneError && n == 1
		if !bad && !(Escaped(r) && keep(r)) {
			i += n
			continue
		}
		if b.Len() == 0 {
			b.Grow(len(s) + 16)
		}
		b.WriteString(s[done:i])
		if bad {
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i]), 16))
		} else {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
		done = i
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

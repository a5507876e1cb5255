// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Safe returns s with every rune a terminal could act on, or that changes
// how the text around it reads, replaced by '?': the control characters
// (C0, DEL and C1: escape sequences, a carriage return, U+009B, which many
// terminals take for a CSI), the invisible format characters (the
// bidirectional overrides, embeddings, isolates and marks, zero-width
// characters) and the line and paragraph separators. Invalid UTF-8 becomes
// U+FFFD. The rest, printable text of any script, is kept.
//
// What kubectl vidra prints comes from API servers and from objects that
// anyone with a namespace may write: messages, names, annotations, Events.
// Every such value goes through Safe, or SafeText or OneLine, before it is
// printed; the plugin's own colours are added after. s is returned as it
// is, without allocating, when it holds nothing to replace.
func Safe(s string) string {
	return strings.Map(func(r rune) rune {
		if replaced(r) {
			return '?'
		}
		return r
	}, s)
}

// SafeText is Safe for text of several lines, such as an error or a diff:
// it keeps '\n' and '\t' and replaces the rest as Safe does.
func SafeText(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && r != '\t' && replaced(r) {
			return '?'
		}
		return r
	}, s)
}

// OneLine keeps a message on one line, or one table cell: each run of
// white space (newlines too) becomes one space, and the rest goes through
// Safe.
func OneLine(s string) string {
	return Safe(strings.Join(strings.Fields(s), " "))
}

// replaced tells the runes Safe replaces.
func replaced(r rune) bool {
	if r < utf8.RuneSelf {
		return r < ' ' || r == 0x7f
	}
	// Cf holds the bidirectional controls (U+061C, U+200E, U+200F,
	// U+202A–U+202E, U+2066–U+2069) and the other invisible format
	// characters; Zl and Zp are U+2028 and U+2029.
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

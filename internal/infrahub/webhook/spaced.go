// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// Spaced returns the body as Python's json.dumps writes it by default, from
// the compact JSON Infrahub 1.7.0–1.7.4 sent: ", " and ": " between tokens,
// and every character outside printable ASCII escaped as \uXXXX
// (ensure_ascii, DEL included), which is the form those versions signed.
// Key order, numbers and the escapes already in the body are kept byte for
// byte, so no parse is needed. ok is false when the body is not compact
// (whitespace between tokens: it was signed as sent, or not by Infrahub),
// is not UTF-8, or would not change.
func Spaced(body []byte) (out []byte, ok bool) {
	out = make([]byte, 0, len(body)+len(body)/8)
	inString, escaped, changed := false, false, false
	for i := 0; i < len(body); {
		b := body[i]
		if !inString {
			switch b {
			case ' ', '\t', '\n', '\r':
				return nil, false
			case ',', ':':
				out = append(out, b, ' ')
				changed = true
			case '"':
				inString = true
				out = append(out, b)
			default:
				out = append(out, b)
			}
			i++
			continue
		}
		switch {
		case escaped:
			escaped = false
			out = append(out, b)
		case b == '\\':
			escaped = true
			out = append(out, b)
		case b == '"':
			inString = false
			out = append(out, b)
		case b == 0x7f:
			out = append(out, `\u007f`...)
			changed = true
		case b < utf8.RuneSelf:
			out = append(out, b)
		default:
			r, size := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && size <= 1 {
				return nil, false
			}
			if r > 0xFFFF {
				hi, lo := utf16.EncodeRune(r)
				out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
			changed = true
			i += size
			continue
		}
		i++
	}
	if inString || !changed {
		return nil, false
	}
	return out, true
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

// isSpace reports JSON white space.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// jsonScan follows JSON text a byte at a time, as far as bounding it needs:
// the nesting of brackets outside strings, and the values, counted as the
// brackets and commas that open them.
type jsonScan struct {
	depth             int
	inString, escaped bool
	values            int64
}

// feed takes the next byte and reports whether a value at the top level, or
// white space between two, ended with it.
func (s *jsonScan) feed(c byte) bool {
	switch {
	case s.inString:
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
		}
	case c == '"':
		s.inString = true
	case c == '{' || c == '[':
		s.depth++
		s.values++
	case c == ',':
		s.values++
	case c == '}' || c == ']':
		s.depth = max(s.depth-1, 0)
	}
	return s.depth == 0 && !s.inString && (c == '}' || c == ']' || c == '"' || isSpace(c))
}

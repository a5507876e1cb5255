// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeups

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// scanEvent reads the fields of ev from line in one pass, skipping every
// other value without decoding it: encoding/json checks a whole line and
// then decodes it, two passes over bodies the analysis never reads, and
// is most of the cost of a large log. It handles the lines API servers
// write; on anything else (an escape in a key, a value of an unexpected
// type, a structure it does not follow) it returns false and the caller
// decodes the line with encoding/json, which decides. Keys are matched
// exactly, as the API server spells them.
func scanEvent(line []byte, ev *event) bool {
	*ev = event{}
	s := scanner{b: line}
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "kind":
			return s.str(&ev.Kind)
		case "level":
			return s.str(&ev.Level)
		case "auditID":
			return s.str(&ev.AuditID)
		case "stage":
			return s.str(&ev.Stage)
		case "requestURI":
			return s.str(&ev.RequestURI)
		case "verb":
			return s.str(&ev.Verb)
		case "userAgent":
			return s.str(&ev.UserAgent)
		case "user":
			return s.object(func(key []byte) bool {
				if string(key) == "username" {
					return s.str(&ev.User.Username)
				}
				return s.other(key, "username")
			})
		case "objectRef":
			if s.null() {
				ev.ObjectRef = nil
				return true
			}
			if ev.ObjectRef == nil {
				// A repeated key fills the same value, as encoding/json does.
				ev.ObjectRef = &objectRef{}
			}
			o := ev.ObjectRef
			return s.object(func(key []byte) bool {
				switch string(key) {
				case "resource":
					return s.str(&o.Resource)
				case "namespace":
					return s.str(&o.Namespace)
				case "name":
					return s.str(&o.Name)
				case "apiGroup":
					return s.str(&o.APIGroup)
				case "subresource":
					return s.str(&o.Subresource)
				}
				return s.other(key, "resource", "namespace", "name", "apiGroup", "subresource")
			})
		case "responseStatus":
			if s.null() {
				ev.ResponseStatus = nil
				return true
			}
			if ev.ResponseStatus == nil {
				// A repeated key fills the same value, as encoding/json does.
				ev.ResponseStatus = &responseStatus{}
			}
			return s.object(func(key []byte) bool {
				if string(key) == "code" {
					return s.integer(&ev.ResponseStatus.Code)
				}
				return s.other(key, "code")
			})
		case "responseObject":
			if s.null() {
				ev.ResponseObject = nil
				return true
			}
			if ev.ResponseObject == nil {
				// A repeated key fills the same value, as encoding/json does.
				ev.ResponseObject = &responseObject{}
			}
			return s.object(func(key []byte) bool {
				if string(key) != "metadata" {
					return s.other(key, "metadata")
				}
				return s.object(func(key []byte) bool {
					if string(key) == "resourceVersion" {
						return s.str(&ev.ResponseObject.Metadata.ResourceVersion)
					}
					return s.other(key, "resourceVersion")
				})
			})
		case "requestReceivedTimestamp":
			var ts string
			if !s.str(&ts) {
				return false
			}
			t, err := time.Parse(time.RFC3339, ts)
			ev.RequestReceivedTimestamp = t
			return err == nil
		}
		return s.other(key, "kind", "level", "auditID", "stage", "requestURI", "verb", "userAgent", "user", "objectRef", "responseStatus", "responseObject", "requestReceivedTimestamp")
	})
	s.space()
	return ok && s.i == len(s.b)
}

// scanner walks JSON text; every method returns false on what it does not
// follow, and never reads past the end.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// peek returns the next byte after white space, 0 at the end.
func (s *scanner) peek() byte {
	s.space()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// object reads an object, calling field after each key with the scanner
// on its value, which field must read.
func (s *scanner) object(field func(key []byte) bool) bool {
	if s.peek() != '{' {
		return false
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return true
	}
	for {
		key, escaped, ok := s.rawString()
		if !ok || escaped {
			return false
		}
		if s.peek() != ':' {
			return false
		}
		s.i++
		if !field(key) {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// rawString reads a string's bytes, without its quotes, and tells whether
// it holds an escape or a byte that is not ASCII.
func (s *scanner) rawString() (raw []byte, escaped, ok bool) {
	if s.peek() != '"' {
		return nil, false, false
	}
	start := s.i + 1
	for i := start; i < len(s.b); i++ {
		switch c := s.b[i]; {
		case c == '\\':
			escaped = true
			i++
		case c == '"':
			s.i = i + 1
			return s.b[start:i], escaped, true
		case c < 0x20:
			return nil, false, false
		case c >= 0x80:
			// Not ASCII: encoding/json decides how to read it (invalid
			// UTF-8 becomes U+FFFD).
			escaped = true
		}
	}
	return nil, false, false
}

// str reads a string, or null, into *dst.
func (s *scanner) str(dst *string) bool {
	if s.null() {
		return true
	}
	start := s.i
	raw, escaped, ok := s.rawString()
	if !ok {
		return false
	}
	if !escaped {
		*dst = string(raw)
		return true
	}
	// Escapes are rare in these fields: encoding/json unquotes them.
	return json.Unmarshal(s.b[start:s.i], dst) == nil
}

// integer reads a whole number.
func (s *scanner) integer(dst *int) bool {
	s.space()
	start := s.i
	for s.i < len(s.b) && (s.b[s.i] == '-' || (s.b[s.i] >= '0' && s.b[s.i] <= '9')) {
		s.i++
	}
	n, err := strconv.Atoi(string(s.b[start:s.i]))
	*dst = n
	return err == nil
}

// null reads a null if one is next.
func (s *scanner) null() bool {
	if s.peek() == 'n' && len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// other skips the value of a key the analysis does not read, unless the key
// is one of names spelt in other case, which encoding/json would read.
func (s *scanner) other(key []byte, names ...string) bool {
	for _, n := range names {
		if len(n) == len(key) && bytes.EqualFold(key, []byte(n)) {
			return false
		}
	}
	return s.skip()
}

// skip passes over one value of any kind: nested objects and arrays by
// counting brackets outside strings.
func (s *scanner) skip() bool {
	switch c := s.peek(); {
	case c == '"':
		_, _, ok := s.rawString()
		return ok
	case c == '{' || c == '[':
		// Brackets must match, outside strings; what is between them is
		// not checked further: the analysis never reads it.
		var stack []byte
		for s.i < len(s.b) {
			switch b := s.b[s.i]; b {
			case '"':
				if _, _, ok := s.rawString(); !ok {
					return false
				}
				continue
			case '{', '[':
				stack = append(stack, b+2) // '{'+2 is '}', '['+2 is ']'
			case '}', ']':
				if len(stack) == 0 || stack[len(stack)-1] != b {
					return false
				}
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					s.i++
					return true
				}
			}
			s.i++
		}
		return false
	case c == 't' || c == 'f' || c == 'n' || c == '-' || (c >= '0' && c <= '9'):
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return literal(s.b[start:s.i])
			}
			s.i++
		}
		return literal(s.b[start:s.i])
	}
	return false
}

// literal tells a JSON literal: true, false, null or a number.
func literal(b []byte) bool {
	switch string(b) {
	case "true", "false", "null":
		return true
	}
	return len(b) > 0 && json.Valid(b)
}

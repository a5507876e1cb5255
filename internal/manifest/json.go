package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"

	sigsjson "sigs.k8s.io/json"
)

// parseJSON parses a JSON manifest: a stream of top-level values, each an
// object or an array whose elements are documents.
//
// encoding/json's Decoder walks the structure and gives the offset of every
// document, hence its line. Values are decoded by sigs.k8s.io/json, as the
// API server does: integers stay int64, and duplicate keys are reported.
func (p *parser) parseJSON(data []byte) {
	lines := newLineIndex(data)
	dec := json.NewDecoder(bytes.NewReader(data))
	for !p.full {
		top := skipJSONSpace(data, int(dec.InputOffset()), false)
		if top == len(data) {
			return
		}
		if data[top] != '[' {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				p.jsonSyntaxError(data, top, lines, err)
				return
			}
			p.jsonDocument(raw, top, lines)
			continue
		}
		if _, err := dec.Token(); err != nil {
			p.jsonSyntaxError(data, top, lines, err)
			return
		}
		for dec.More() && !p.full {
			start := skipJSONSpace(data, int(dec.InputOffset()), true)
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				p.jsonSyntaxError(data, top, lines, err)
				return
			}
			p.jsonDocument(raw, start, lines)
		}
		if _, err := dec.Token(); err != nil && !p.full {
			p.jsonSyntaxError(data, top, lines, err)
			return
		}
	}
}

// jsonSyntaxError reports the syntax error of the top-level value starting at
// offset top. The Decoder's own offsets count only the bytes of values, not
// the commas and brackets its Token reads, so the value is scanned again by
// json.Unmarshal, whose offsets are exact.
func (p *parser) jsonSyntaxError(data []byte, top int, lines lineIndex, decErr error) {
	p.syntaxError = true
	pos, msg := top, decErr.Error()
	var raw json.RawMessage
	var syntax *json.SyntaxError
	if err := json.Unmarshal(data[top:], &raw); errors.As(err, &syntax) {
		// Offset counts the bytes read up to and including the bad one.
		pos, msg = top+max(int(syntax.Offset)-1, 0), syntax.Error()
	}
	p.invalid(p.takeIndex(), lines.line(pos), "", "invalid JSON: %s", msg)
}

// jsonDocument decodes and checks one document starting at offset start.
func (p *parser) jsonDocument(raw []byte, start int, lines lineIndex) {
	line := lines.line(start)
	var v any
	strict, err := sigsjson.UnmarshalStrict(raw, &v, sigsjson.DisallowDuplicateFields)
	if err != nil {
		// The syntax is valid; what is left is a number out of float64's range.
		p.invalid(p.takeIndex(), line, "", "invalid JSON: %s", err.Error())
		return
	}
	if len(strict) > 0 {
		index := p.takeIndex()
		for _, e := range strict {
			field, msg := "", e.Error()
			var fe sigsjson.FieldError
			if errors.As(e, &fe) {
				field, msg = fe.FieldPath(), "this key is given twice"
			}
			p.invalid(index, line, field, "%s", msg)
		}
		return
	}
	p.value(v, &jsonPosition{raw: raw, start: start, lines: lines}, false)
}

// jsonPosition locates a JSON value in the manifest. JSON keeps no positions
// of fields, but the items of a List are found by walking the value again.
type jsonPosition struct {
	raw   []byte
	start int
	lines lineIndex
	// items caches the offsets of the items in raw: walking raw once per
	// item would make a long List quadratic.
	items  []int
	walked bool
}

func (j *jsonPosition) line() int               { return j.lines.line(j.start) }
func (j *jsonPosition) fieldLine(...string) int { return 0 }

func (j *jsonPosition) item(i int) position {
	if !j.walked {
		j.items, j.walked = jsonItemOffsets(j.raw), true
	}
	if i >= len(j.items) {
		return nil
	}
	end := len(j.raw)
	if i+1 < len(j.items) {
		end = j.items[i+1]
	}
	return &jsonPosition{raw: j.raw[j.items[i]:end], start: j.start + j.items[i], lines: j.lines}
}

// jsonItemOffsets returns the offsets in raw, a valid JSON object, of the
// elements of its "items" array.
func jsonItemOffsets(raw []byte) []int {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		if key != "items" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil
		}
		var offsets []int
		for dec.More() {
			offsets = append(offsets, skipJSONSpace(raw, int(dec.InputOffset()), true))
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil
			}
		}
		return offsets
	}
	return nil
}

// skipJSONSpace returns the offset of the first byte at or after from that is
// not JSON white space (nor a comma, when comma is set), or len(data).
func skipJSONSpace(data []byte, from int, comma bool) int {
	for from < len(data) {
		switch data[from] {
		case ' ', '\t', '\r', '\n':
		case ',':
			if !comma {
				return from
			}
		default:
			return from
		}
		from++
	}
	return from
}

// lineIndex holds the offsets at which lines 2, 3, ... of a text start, to
// turn offsets into lines without rescanning the text each time.
type lineIndex []int

func newLineIndex(data []byte) lineIndex {
	var starts lineIndex
	for i, b := range data {
		if b == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// line returns the 1-based line of the byte at offset off.
func (l lineIndex) line(off int) int {
	return sort.SearchInts(l, off+1) + 1
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
		if top == len(data) || !p.readDocument(lines.line(top)) {
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
	if index, ok := p.takeIndex(lines.line(pos)); ok {
		p.invalid(index, lines.line(pos), "", "invalid JSON: %s", msg)
	}
}

// jsonDocument decodes and checks one document starting at offset start.
func (p *parser) jsonDocument(raw []byte, start int, lines lineIndex) {
	line := lines.line(start)
	weight, over := nodeWeight(raw, p.nodesLeft())
	if !p.spendNodes(weight, over, lines.line(start+max(over, 0))) {
		return
	}
	if errs := jsonShapeErrors(raw, line); len(errs) > 0 {
		index, ok := p.takeIndex(line)
		if !ok {
			return
		}
		for _, e := range errs {
			e.Index = index
			p.add(e)
		}
		return
	}
	var v any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &v); err != nil {
		// The syntax is valid; what is left is a number out of float64's range.
		if index, ok := p.takeIndex(line); ok {
			p.invalid(index, line, "", "invalid JSON: %s", err.Error())
		}
		return
	}
	p.value(v, &jsonPosition{raw: raw, start: start, lines: lines}, false)
}

// jsonShapeErrors are the errors of raw, a valid JSON value at line, that
// the JSON decoders would let through: keys given twice (at most maxErrors)
// and a value nested deeper than maxDepth. Their Index is the caller's to
// set.
func jsonShapeErrors(raw []byte, line int) []*Error {
	dups, deep := scanJSON(raw)
	errs := make([]*Error, 0, len(dups)+1)
	for _, path := range dups {
		errs = append(errs, &Error{Line: line, Field: path.String(), Reason: ReasonInvalidManifest, Message: "this key is given twice"})
	}
	if deep != nil {
		errs = append(errs, &Error{Line: line, Field: deep.String(), Reason: ReasonInvalidManifest,
			Message: fmt.Sprintf("values nest deeper than %d levels; no Kubernetes object needs that many, flatten it", maxDepth)})
	}
	return errs
}

// scanJSON returns the paths of the keys given more than once in an object
// of raw, a valid JSON value, each once and at most maxErrors of them, and
// the path of the first value nested deeper than maxDepth, if any (the scan
// stops there). sigs.k8s.io/json's strict mode finds duplicates too, but
// renders the whole path of every repetition: a deep object repeating a key
// a hundred thousand times cost it hundreds of megabytes.
func scanJSON(raw []byte) (dups []*fieldPath, deep *fieldPath) {
	type frame struct {
		path *fieldPath
		// keys holds the keys of an object seen so far, true once reported.
		keys map[string]bool
		// next is the index of an array's next element.
		next int
		// key is the key whose value comes next in an object, nil when a key
		// comes next.
		key *string
	}
	var stack []*frame
	// at returns the path of the value about to be read.
	at := func() *fieldPath {
		if len(stack) == 0 {
			return nil
		}
		f := stack[len(stack)-1]
		if f.keys == nil {
			f.next++
			return f.path.elem(f.next - 1)
		}
		k := *f.key
		f.key = nil
		return f.path.child(k)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers are skipped; no need to parse them
	for len(dups) < maxErrors {
		tok, err := dec.Token()
		if err != nil {
			return dups, nil
		}
		if len(stack) > 0 {
			if f := stack[len(stack)-1]; f.keys != nil && f.key == nil && tok != json.Delim('}') {
				k, _ := tok.(string)
				switch reported, seen := f.keys[k]; {
				case !seen:
					f.keys[k] = false
				case !reported:
					dups = append(dups, f.path.child(k))
					f.keys[k] = true
				}
				f.key = &k
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			path := at()
			if len(stack) == maxDepth {
				return dups, path
			}
			f := &frame{path: path}
			if tok == json.Delim('{') {
				f.keys = map[string]bool{}
			}
			stack = append(stack, f)
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			at()
		}
	}
	return dups, nil
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
	// inItems is set on an item of a List: the items of a List in its
	// items are not walked, and take its line. Each level's walk reads its
	// whole value again, so a List nested hundreds of times around one
	// large object cost depth times size, seconds of CPU and gigabytes.
	inItems bool
}

func (j *jsonPosition) line() int               { return j.lines.line(j.start) }
func (j *jsonPosition) fieldLine(...string) int { return 0 }

func (j *jsonPosition) item(i int) position {
	if j.inItems {
		return nil
	}
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
	return &jsonPosition{raw: j.raw[j.items[i]:end], start: j.start + j.items[i], lines: j.lines, inItems: true}
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

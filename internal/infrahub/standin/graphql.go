// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The stand-in reads GraphQL as far as queries of CoreArtifact need: an
// operation with variable definitions, fields with aliases, arguments and
// selection sets. Fragments and directives are refused as a syntax error
// (Vidra's queries and the earlier ArtifactIDs use none).

// field is a selected field.
type field struct {
	name, alias string
	args        []arg
	sel         []*field
	line, col   int
}

// key is the field's key in the answer: its alias, else its name.
func (f *field) key() string {
	if f.alias != "" {
		return f.alias
	}
	return f.name
}

type arg struct {
	name string
	val  value
}

// value is an argument's value as written.
type value struct {
	variable string // $name
	lit      any    // string, int64, bool, nil, []value or enum (an enumName)
}

type enumName string

// document is a parsed query: its operation's variables (name → whether
// the type is a list) and top-level selection.
type document struct {
	vars map[string]bool
	sel  []*field
}

// gqlError is a GraphQL error of the answer.
type gqlError struct {
	Message   string     `json:"message"`
	Locations []location `json:"locations,omitempty"`
}

type location struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

type token struct {
	kind      byte // 'n' name, 's' string, 'i' int, 'p' punctuation, 0 end
	text      string
	line, col int
}

type parser struct {
	src       string
	pos       int
	line, col int
	tok       token
	err       *gqlError
}

// parseDocument parses src; a syntax error is a gqlError as GraphQL
// servers word it.
func parseDocument(src string) (*document, *gqlError) {
	p := &parser{src: src, line: 1, col: 1}
	p.next()
	doc := &document{vars: map[string]bool{}}
	if p.tok.kind == 'n' && (p.tok.text == "query") {
		p.next()
		if p.tok.kind == 'n' {
			p.next()
		}
		if p.is("(") {
			p.next()
			for !p.is(")") && p.err == nil {
				p.expect("$")
				name := p.name()
				p.expect(":")
				doc.vars[name] = p.typeRef()
				if p.is("=") {
					p.next()
					p.value()
				}
			}
			p.expect(")")
		}
	}
	doc.sel = p.selectionSet()
	if p.err == nil && p.tok.kind != 0 {
		p.fail("Unexpected %s.", p.describe())
	}
	if p.err != nil {
		return nil, p.err
	}
	return doc, nil
}

func (p *parser) is(punct string) bool { return p.tok.kind == 'p' && p.tok.text == punct }

func (p *parser) fail(format string, a ...any) {
	if p.err == nil {
		p.err = &gqlError{Message: "Syntax Error: " + fmt.Sprintf(format, a...), Locations: []location{{p.tok.line, p.tok.col}}}
	}
	p.tok = token{}
}

func (p *parser) describe() string {
	switch p.tok.kind {
	case 0:
		return "<EOF>"
	case 'n':
		return "Name " + strconv.Quote(p.tok.text)
	}
	return strconv.Quote(p.tok.text)
}

func (p *parser) expect(punct string) {
	if !p.is(punct) {
		p.fail("Expected %q, found %s.", punct, p.describe())
		return
	}
	p.next()
}

func (p *parser) name() string {
	if p.tok.kind != 'n' {
		p.fail("Expected Name, found %s.", p.describe())
		return ""
	}
	n := p.tok.text
	p.next()
	return n
}

// typeRef reads a type and reports whether it is a list.
func (p *parser) typeRef() bool {
	list := false
	if p.is("[") {
		p.next()
		p.typeRef()
		p.expect("]")
		list = true
	} else {
		p.name()
	}
	if p.is("!") {
		p.next()
	}
	return list
}

func (p *parser) selectionSet() []*field {
	p.expect("{")
	var sel []*field
	for !p.is("}") && p.err == nil {
		if p.is("...") || p.is("@") {
			p.fail("Unexpected %s.", p.describe())
			break
		}
		f := &field{line: p.tok.line, col: p.tok.col}
		f.name = p.name()
		if p.is(":") {
			p.next()
			f.alias, f.name = f.name, p.name()
		}
		if p.is("(") {
			p.next()
			for !p.is(")") && p.err == nil {
				a := arg{name: p.name()}
				p.expect(":")
				a.val = p.value()
				f.args = append(f.args, a)
			}
			p.expect(")")
		}
		if p.is("{") {
			f.sel = p.selectionSet()
		}
		sel = append(sel, f)
	}
	p.expect("}")
	return sel
}

func (p *parser) value() value {
	switch {
	case p.is("$"):
		p.next()
		return value{variable: p.name()}
	case p.is("["):
		p.next()
		var list []value
		for !p.is("]") && p.err == nil {
			list = append(list, p.value())
		}
		p.expect("]")
		return value{lit: list}
	case p.tok.kind == 's':
		v := value{lit: p.tok.text}
		p.next()
		return v
	case p.tok.kind == 'i':
		n, err := strconv.ParseInt(p.tok.text, 10, 64)
		if err != nil {
			p.fail("Invalid number %s.", p.describe())
		}
		p.next()
		return value{lit: n}
	case p.tok.kind == 'n':
		t := p.tok.text
		p.next()
		switch t {
		case "true":
			return value{lit: true}
		case "false":
			return value{lit: false}
		case "null":
			return value{lit: nil}
		}
		return value{lit: enumName(t)}
	}
	p.fail("Unexpected %s.", p.describe())
	return value{}
}

// next reads the next token into p.tok.
func (p *parser) next() {
	if p.err != nil {
		return
	}
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == '\n':
			p.pos++
			p.line++
			p.col = 1
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == ',':
			p.advance(1)
			continue
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.advance(1)
			}
			continue
		}
		break
	}
	p.tok = token{line: p.line, col: p.col}
	if p.pos >= len(p.src) {
		return
	}
	c := p.src[p.pos]
	start := p.pos
	switch {
	case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
			p.advance(1)
		}
		p.tok.kind, p.tok.text = 'n', p.src[start:p.pos]
	case c == '-' || c >= '0' && c <= '9':
		p.advance(1)
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.advance(1)
		}
		p.tok.kind, p.tok.text = 'i', p.src[start:p.pos]
	case c == '"':
		p.advance(1)
		for p.pos < len(p.src) && p.src[p.pos] != '"' {
			if p.src[p.pos] == '\\' {
				p.advance(1)
			}
			p.advance(1)
		}
		p.advance(1)
		var s string
		if p.pos > len(p.src) || json.Unmarshal([]byte(p.src[start:min(p.pos, len(p.src))]), &s) != nil {
			p.tok = token{kind: 'p', text: "\"", line: p.tok.line, col: p.tok.col}
			p.fail("Unterminated string.")
			return
		}
		p.tok.kind, p.tok.text = 's', s
	case strings.HasPrefix(p.src[p.pos:], "..."):
		p.advance(3)
		p.tok.kind, p.tok.text = 'p', "..."
	case strings.IndexByte("{}()[]:$!=@", c) >= 0:
		p.advance(1)
		p.tok.kind, p.tok.text = 'p', string(c)
	default:
		p.tok.kind, p.tok.text = 'p', string(c)
		p.fail("Unexpected character %q.", string(c))
	}
}

func (p *parser) advance(n int) {
	p.pos += n
	p.col += n
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	yaml "go.yaml.in/yaml/v3"
)

// chunk is the text between two document separators.
type chunk struct {
	text string
	// line is the 1-based line of the manifest text starts on.
	line int
	// content is false when the chunk holds only blank lines, comments,
	// directives, document markers: nothing to parse.
	content bool
}

// parseYAML parses a multi-document YAML manifest.
//
// Documents are split on separator lines before parsing rather than read
// from one stream, so that a syntax error in one document does not hide the
// documents after it (a YAML parser cannot resume after an error), and so
// that every line can be made absolute from its chunk's first line.
func (p *parser) parseYAML(manifest string) {
	for c := range splitYAML(manifest) {
		if p.full {
			return
		}
		if c.content {
			p.parseChunk(c)
		}
	}
}

// splitYAML splits a manifest on document separators: lines that start with
// "---" followed by the end of the line, a space or a tab. The separator line
// is the first line of the chunk it starts, so that the YAML parser sees
// "--- {a: 1}" whole. Directives ("%YAML 1.2") stay with the document their
// "---" starts. The chunks are yielded one at a time rather than collected:
// a manifest of nothing but separators would otherwise cost ten times its
// size in chunks.
func splitYAML(s string) iter.Seq[chunk] {
	return func(yield func(chunk) bool) {
		splitYAMLChunks(s, yield)
	}
}

func splitYAMLChunks(s string, yield func(chunk) bool) {
	cur := chunk{line: 1}
	start, line, directives := 0, 1, false
	for pos := 0; pos < len(s); line++ {
		end, next := len(s), len(s)
		if i := strings.IndexByte(s[pos:], '\n'); i >= 0 {
			end, next = pos+i, pos+i+1
		}
		text := strings.TrimSuffix(s[pos:end], "\r")
		separator := isSeparator(text)
		if separator && !(directives && !cur.content) {
			if pos > start {
				cur.text = s[start:pos]
				if !yield(cur) {
					return
				}
			}
			cur, start, directives = chunk{line: line}, pos, false
		}
		switch {
		case separator, isMarker(text, "..."):
			text = text[3:]
		case strings.HasPrefix(text, "%"):
			directives = true
			text = ""
		}
		if t := strings.TrimSpace(text); t != "" && t[0] != '#' {
			cur.content = true
		}
		pos = next
	}
	if start < len(s) {
		cur.text = s[start:]
		yield(cur)
	}
}

// isSeparator tells whether a line starts a new YAML document.
func isSeparator(line string) bool { return isMarker(line, "---") }

// isMarker tells whether a line starts with a document marker ("---" or
// "..."), which YAML only takes as one at the start of a line and followed
// by white space or nothing.
func isMarker(line, marker string) bool {
	return strings.HasPrefix(line, marker) && (len(line) == 3 || line[3] == ' ' || line[3] == '\t')
}

// lineMap turns the line numbers the YAML parser gives within a chunk into
// lines of the manifest. Lines of the manifest are separated by "\n", as
// editors, grep and git count them (a "\r\n" is one separator); the parser
// also breaks lines at a lone "\r" and at U+0085, U+2028 and U+2029, so a
// chunk holding one of those needs a table.
type lineMap struct {
	// start is the line of the manifest the chunk starts on.
	start int
	// table[i] is the number of "\n" before the parser's line i+1; nil when
	// the parser's lines are the manifest's.
	table []int
}

func newLineMap(c chunk) lineMap {
	m := lineMap{start: c.line}
	if !strings.ContainsAny(c.text, "\u0085\u2028\u2029") && strings.Count(c.text, "\r") == strings.Count(c.text, "\r\n") {
		return m
	}
	m.table = []int{0}
	newlines := 0
	for i, r := range c.text {
		switch r {
		case '\r':
			if strings.HasPrefix(c.text[i+1:], "\n") {
				continue // the "\n" ends the line
			}
		case '\n':
			newlines++
		case '\u0085', '\u2028', '\u2029':
		default:
			continue
		}
		m.table = append(m.table, newlines)
	}
	return m
}

// line returns the manifest line of the parser's line n (1-based).
func (m lineMap) line(n int) int {
	n = max(n, 1)
	if m.table == nil {
		return m.start + n - 1
	}
	return m.start + m.table[min(n, len(m.table))-1]
}

// parseChunk parses the documents of one chunk: one, or more when a
// document ends with "..." and another follows without "---".
func (p *parser) parseChunk(c chunk) {
	// The decoder builds the node tree of a whole document before it
	// returns, so the nodes are counted before it runs.
	weight, over := nodeWeight(c.text, p.nodesLeft())
	if !p.spendNodes(weight, over, c.line+strings.Count(c.text[:max(over, 0)], "\n")) {
		return
	}
	dec := yaml.NewDecoder(strings.NewReader(c.text))
	lines := newLineMap(c)
	for !p.full {
		var doc yaml.Node
		err := decodeNode(dec, &doc)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			p.syntaxError = true
			line, msg := yamlErrorPosition(err, c, lines)
			if index, ok := p.takeIndex(line); ok {
				p.invalid(index, line, "", "invalid YAML: %s", msg)
			}
			return
		}
		if !p.readDocument(lines.line(doc.Line)) {
			return
		}
		if len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
			// "---" followed by nothing, or an explicit null: an empty document.
			continue
		}
		if root.Kind == yaml.SequenceNode && p.jsonArrays {
			for _, item := range root.Content {
				p.yamlDocument(item, lines)
			}
			continue
		}
		p.yamlDocument(root, lines)
	}
}

// yamlDocument converts and checks one document; lines locates its nodes.
func (p *parser) yamlDocument(n *yaml.Node, lines lineMap) {
	if p.full {
		return
	}
	conv := converter{p: p, lines: lines}
	v := conv.value(n, nil, 0)
	if len(conv.errs) > 0 {
		index, ok := p.takeIndex(lines.line(n.Line))
		if !ok {
			return
		}
		for _, e := range conv.errs {
			e.Index = index
			p.add(e)
		}
		return
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	p.value(v, yamlPosition{n: n, lines: lines}, false)
}

// decodeNode decodes the next document of dec. The parser reports errors by
// panicking and recovering internally; recovering here too means that an
// input reaching a bug in it fails this manifest instead of crashing the
// operator.
func decodeNode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: the parser failed: %v", r)
		}
	}()
	return dec.Decode(n)
}

// yamlErrorPosition returns the absolute line of a YAML syntax error in
// chunk c, and its message without the "yaml: line N:" prefix.
//
// The parser's line numbers need care. It reports 1-based lines for scanner
// errors but 0-based ones for parser errors (those of parserProblem), and no
// line at all for an error on the first line or for errors found outside the
// scanner (bad characters, unknown anchors), which are located here by
// searching the text. For parser errors it also reports the line where the
// enclosing mapping or list starts rather than the line of the offending
// token; that line is asked of the older parser behind sigs.k8s.io/yaml,
// which reports the token's.
func yamlErrorPosition(err error, c chunk, lines lineMap) (int, string) {
	// Errors at the end of the input are reported past the last line of the
	// document, which is the next document's "---" or nothing at all; the
	// text to fix is on the last line that holds something.
	last := lastContentLine(c)
	abs := func(parserLine int) int { return min(lines.line(parserLine), last) }
	at := func(offset int) int { return min(c.line+strings.Count(c.text[:offset], "\n"), last) }

	line, msg, ok := splitYAMLError(err)
	if ok {
		if !parserProblem(msg) {
			return abs(line), msg
		}
		line++
		if token, ok := tokenLine(c, msg); ok && abs(token) != abs(line) {
			return abs(token), fmt.Sprintf("%s (the enclosing structure starts on line %d)", msg, abs(line))
		}
		return abs(line), msg
	}
	if name, ok := strings.CutPrefix(msg, "unknown anchor '"); ok {
		name, _, _ = strings.Cut(name, "'")
		if i := strings.Index(c.text, "*"+name); i >= 0 {
			return at(i), msg
		}
	}
	if readerProblem(msg) {
		if i := firstUnreadable(c.text); i >= 0 {
			return at(i), msg
		}
	}
	if parserProblem(msg) {
		if token, ok := tokenLine(c, msg); ok {
			return abs(token), msg
		}
	}
	return abs(1), msg
}

// lastContentLine returns the absolute line of the last line of c that is
// not blank.
func lastContentLine(c chunk) int {
	text := strings.TrimRight(c.text, " \t\r\n")
	return c.line + strings.Count(text, "\n")
}

// splitYAMLError splits "yaml: line N: message" into N and the message; ok
// is false when the error carries no line.
func splitYAMLError(err error) (line int, msg string, ok bool) {
	msg = err.Error()
	if i := strings.LastIndex(msg, "yaml: "); i >= 0 {
		msg = msg[i+len("yaml: "):]
	}
	if rest, found := strings.CutPrefix(msg, "line "); found {
		if num, text, found := strings.Cut(rest, ": "); found {
			if n, err := strconv.Atoi(num); err == nil && n > 0 {
				return n, text, true
			}
		}
	}
	return 0, msg, false
}

// tokenLine returns the 1-based line, within c, of the token a parser error
// is about, as the YAML parser of go.yaml.in/yaml/v2 (the one behind
// sigs.k8s.io/yaml) reports it (0-based, for parser errors). It is only
// trusted when that parser fails with the same problem.
//
// The older parser is asked to parse only, never to decode: c is known to be
// invalid, but that parser reads only the first document of c, which may be
// valid, and decoding it would expand its aliases with nothing but that
// parser's ratio of aliases to nodes to stop it, which padding defeats (a
// 44 KB manifest expanded to 1.5 GB that way).
func tokenLine(c chunk, problem string) (line int, ok bool) {
	defer func() {
		if recover() != nil {
			line, ok = 0, false
		}
	}()
	err := yamlv2.Unmarshal([]byte(c.text), &parseOnly{})
	if err == nil {
		return 0, false
	}
	n, msg, found := splitYAMLError(err)
	if msg != problem {
		return 0, false
	}
	if !found {
		return 1, true
	}
	return n + 1, true
}

// parseOnly is a go.yaml.in/yaml/v2 unmarshal target that takes nothing:
// decoding into it parses the document and stops there, so no alias is ever
// expanded.
type parseOnly struct{}

// UnmarshalYAML ignores the value, without decoding it.
func (parseOnly) UnmarshalYAML(func(any) error) error { return nil }

// parserProblem tells whether msg is one the YAML parser (rather than its
// scanner) reports, whose line is 0-based.
func parserProblem(msg string) bool {
	switch msg {
	case "did not find expected <stream-start>",
		"did not find expected <document start>",
		"did not find expected node content",
		"did not find expected '-' indicator",
		"did not find expected key",
		"did not find expected ',' or ']'",
		"did not find expected ',' or '}'",
		"found undefined tag handle",
		"found duplicate %YAML directive",
		"found duplicate %TAG directive",
		"found incompatible YAML document":
		return true
	}
	return false
}

// readerProblem tells whether msg is one the YAML parser reports for
// characters it does not allow, which it gives no line for.
func readerProblem(msg string) bool {
	return msg == "control characters are not allowed" || msg == "invalid Unicode character"
}

// firstUnreadable returns the offset of the first character of s, valid
// UTF-8, that YAML does not allow in a stream, or -1.
func firstUnreadable(s string) int {
	for i, r := range s {
		switch {
		case r == '\t' || r == '\n' || r == '\r' || r == 0x85:
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0xfffe || r == 0xffff:
			return i
		}
	}
	return -1
}

// converter turns a YAML node tree into the values an unstructured object
// holds: map[string]any, []any, string, int64, float64, bool and nil.
type converter struct {
	p *parser
	// lines locates the nodes in the manifest.
	lines lineMap
	// inAlias counts the aliases being expanded; what is reached through one
	// costs alias budget.
	inAlias int
	// active holds the anchored nodes being converted, to catch an alias
	// inside the node it refers to, which would expand forever.
	active map[*yaml.Node]bool
	// exhausted is set once the alias budget ran out, so it is reported
	// once, or once maxErrors errors were found: the parser keeps no more,
	// and each costs its field path.
	exhausted bool
	errs      []*Error
}

func (c *converter) fail(n *yaml.Node, path *fieldPath, format string, args ...any) {
	if len(c.errs) == maxErrors {
		c.exhausted = true
		return
	}
	c.errs = append(c.errs, &Error{
		Line:    c.lines.line(n.Line),
		Field:   path.String(),
		Reason:  ReasonInvalidManifest,
		Message: fmt.Sprintf(format, args...),
	})
}

// value converts n, found at path.
func (c *converter) value(n *yaml.Node, path *fieldPath, depth int) any {
	if c.exhausted {
		return nil
	}
	if c.inAlias > 0 {
		c.p.aliasBudget -= 1 + len(n.Value)
		if c.p.aliasBudget < 0 {
			c.exhausted = true
			c.fail(n, path, "YAML aliases expand to too much data (over %d nodes and bytes for this %s: %d plus its size, at most %d); write the values out or reuse fewer", c.p.aliasLimit, c.p.noun, minAliasExpansion, maxAliasExpansion)
			return nil
		}
	}
	if depth > maxDepth {
		c.fail(n, path, "values nest deeper than %d levels; no Kubernetes object needs that many, flatten it", maxDepth)
		return nil
	}
	if n.Anchor != "" {
		if c.active[n] {
			c.fail(n, path, "anchor &%s contains an alias to itself", n.Anchor)
			return nil
		}
		if c.active == nil {
			c.active = map[*yaml.Node]bool{}
		}
		c.active[n] = true
		defer delete(c.active, n)
	}

	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			c.fail(n, path, "alias *%s refers to nothing", n.Value)
			return nil
		}
		c.inAlias++
		defer func() { c.inAlias-- }()
		return c.value(n.Alias, path, depth+1)
	case yaml.MappingNode:
		return c.mapping(n, path, depth)
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, item := range n.Content {
			s[i] = c.value(item, path.elem(i), depth+1)
		}
		return s
	case yaml.ScalarNode:
		return c.scalar(n, path)
	default:
		c.fail(n, path, "unexpected YAML node")
		return nil
	}
}

// mapping converts a mapping. Keys must be scalars and unique; merge keys
// ("<<: *defaults") add the keys of the mappings they name that the mapping
// does not set itself, earlier mappings first, as YAML specifies.
func (c *converter) mapping(n *yaml.Node, path *fieldPath, depth int) any {
	m := make(map[string]any, len(n.Content)/2)
	var merges []*yaml.Node
	// firstLines holds the line of each key's first occurrence, made at the
	// first key given twice: looking each duplicate up in n again would
	// make a mapping of N keys given twice cost N², seconds at 1 MB.
	var firstLines map[string]int
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			c.fail(k, path, "a key must be a string, not a YAML %s", kindName(k.Kind))
			continue
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if _, dup := m[k.Value]; dup {
			if firstLines == nil {
				firstLines = firstKeyLines(n)
			}
			c.fail(k, path.child(k.Value), "this key is given twice (first on line %d)", c.lines.line(firstLines[k.Value]))
			continue
		}
		m[k.Value] = c.value(v, path.child(k.Value), depth+1)
	}
	for _, src := range merges {
		c.merge(m, src, path, depth)
	}
	return m
}

// merge adds to m the keys of the merge source src that m does not have.
func (c *converter) merge(m map[string]any, src *yaml.Node, path *fieldPath, depth int) {
	sources := []*yaml.Node{src}
	target, viaAlias := src, false
	if src.Kind == yaml.AliasNode && src.Alias != nil {
		target, viaAlias = src.Alias, true
	}
	if target.Kind == yaml.SequenceNode {
		// The elements are converted here rather than through value, so the
		// budget and the cycle check that value applies are applied here.
		if viaAlias {
			c.inAlias++
			defer func() { c.inAlias-- }()
		}
		if target.Anchor != "" {
			if c.active[target] {
				c.fail(src, path, "anchor &%s contains an alias to itself", target.Anchor)
				return
			}
			if c.active == nil {
				c.active = map[*yaml.Node]bool{}
			}
			c.active[target] = true
			defer delete(c.active, target)
		}
		sources = target.Content
	}
	for _, s := range sources {
		failed := len(c.errs)
		v := c.value(s, path, depth+1)
		if len(c.errs) > failed {
			continue
		}
		sm, ok := v.(map[string]any)
		if !ok {
			c.fail(s, path, "a merge key (<<) must name a mapping or a list of mappings, not %s", describe(v))
			continue
		}
		for k, val := range sm {
			if _, set := m[k]; !set {
				m[k] = val
			}
		}
	}
}

// scalar converts a scalar by its resolved tag. Tags JSON has no type for
// (timestamps, binary, custom tags) keep their text, which is what the API
// server expects for them (RFC 3339 times, base64 data).
func (c *converter) scalar(n *yaml.Node, path *fieldPath) any {
	switch tag := n.ShortTag(); tag {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			c.fail(n, path, "%q is not a valid boolean", n.Value)
			return nil
		}
		return b
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return i
		}
		var u uint64
		if err := n.Decode(&u); err == nil {
			// Past int64, like JSON numbers that do not fit it.
			return float64(u)
		}
		c.fail(n, path, "%q is not a valid integer", n.Value)
		return nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			c.fail(n, path, "%q is not a valid number", n.Value)
			return nil
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			c.fail(n, path, "%q cannot be sent to the API server: JSON has no infinity or NaN; quote it to make it a string", n.Value)
			return nil
		}
		return f
	default:
		return n.Value
	}
}

// firstKeyLines returns the chunk-relative line of the first occurrence of
// each scalar key of the mapping n.
func firstKeyLines(n *yaml.Node) map[string]int {
	lines := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if _, seen := lines[k.Value]; k.Kind == yaml.ScalarNode && !seen {
			lines[k.Value] = n.Content[i].Line
		}
	}
	return lines
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "sequence"
	case yaml.AliasNode:
		return "alias"
	default:
		return "node"
	}
}

// yamlPosition locates a YAML node and its fields in the manifest.
type yamlPosition struct {
	n *yaml.Node
	// lines locates the nodes in the manifest.
	lines lineMap
}

func (y yamlPosition) line() int { return y.lines.line(y.n.Line) }

// fieldLine returns the line of the key at path, 0 when the path is not
// written out (missing, or brought in by a merge key).
func (y yamlPosition) fieldLine(path ...string) int {
	line := 0
	n := y.n
	for _, key := range path {
		k, v := lookup(n, key)
		if k == nil {
			return 0
		}
		line, n = k.Line, v
	}
	if line == 0 {
		return 0
	}
	return y.lines.line(line)
}

func (y yamlPosition) item(i int) position {
	_, items := lookup(y.n, "items")
	if items == nil || items.Kind != yaml.SequenceNode || i >= len(items.Content) {
		return nil
	}
	item := items.Content[i]
	if item.Kind == yaml.AliasNode && item.Alias != nil {
		item = item.Alias
	}
	return yamlPosition{n: item, lines: y.lines}
}

// lookup returns the key and value nodes of key in mapping n, following
// aliases, or nils.
func lookup(n *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == key && k.ShortTag() != "!!merge" {
			v := n.Content[i+1]
			if v.Kind == yaml.AliasNode && v.Alias != nil {
				v = v.Alias
			}
			return k, v
		}
	}
	return nil, nil
}

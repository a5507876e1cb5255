// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// MaxManifestBytes is the largest manifest Parse accepts. spec.manifest has
// a smaller bound of its own (v1alpha1.MaxManifestBytes, which the CRD and
// the apply engine check); this one keeps the parser safe however it is
// called, whatever the text is assembled from.
const MaxManifestBytes = 3 << 20

// maxErrors bounds the errors Parse collects: past it, a manifest is
// garbage rather than a manifest with mistakes, and listing more costs memory
// and time for nobody.
const maxErrors = 1000

// MaxObjects is the most objects one manifest may hold (documents, JSON
// array elements and List items that take an index). Every object Vidra
// applies gets an entry in status.managedResources, which must fit in the
// VidraResource beside the manifest itself, under etcd's default request
// limit of 1.5 MiB. An entry is {"apiVersion":"","kind":"","namespace":"",
// "name":""} (50 bytes) plus its values: with a 253-byte group, a 63-byte
// version, a 63-byte kind and namespace and a 253-byte name, at most about
// 750 bytes, and 100 to 150 bytes for real objects. 1000 entries therefore
// take at most about 0.75 MiB and usually 0.15 MiB, leaving the rest of the
// 1.5 MiB to the manifest and the other fields.
const MaxObjects = 1000

// maxDocuments bounds the YAML documents and top-level JSON values a
// manifest may hold, including empty ones ("null", "[]") that take no index:
// each costs a decoder (about 5 KiB), so without a bound a manifest of tiny
// empty documents would cost a thousand times its size.
const maxDocuments = 2 * MaxObjects

// maxAliasExpansion bounds, per manifest, what YAML aliases may expand to:
// every node reached through an alias costs 1 plus the length of its scalar
// text. Without it a few lines of nested aliases (a "billion laughs") expand
// to gigabytes. Within that cap, aliases may expand to no more than
// minAliasExpansion plus the size of the manifest, as go-yaml and the
// Kubernetes decoders bound expansion relative to the input: memory then
// grows with the manifest, not with how cleverly it nests aliases. Real
// manifests reuse a few labels or a container spec, far below this.
const (
	maxAliasExpansion = 1 << 18
	minAliasExpansion = 16 << 10
)

// maxDepth bounds how deeply values nest. The YAML and JSON parsers stop at
// 10000 levels; real objects, CRD schemas included, nest a few dozen, and
// every error deep inside carries its whole field path, so Vidra stops far
// earlier. Aliases could nest deeper than the text, so conversion checks.
const maxDepth = 1000

// Object is one desired object of a manifest.
type Object struct {
	// Index is the 0-based position of the object among the documents of the
	// manifest. Documents that hold nothing (empty, only comments, or null)
	// are skipped and take no index. Every other document takes one: a YAML
	// document, a top-level JSON value, or an element of a top-level JSON
	// array; a List (kind "List" or any kind ending in "List" with an items
	// array) takes none itself but gives one to each of its items, in order.
	// A document that cannot be parsed still takes its index, so the indexes
	// of the documents after it do not depend on it. When Parse reports no
	// error, objs[i].Index == i.
	Index int
	// Line is the 1-based line of the manifest where the object starts: its
	// first key in YAML (comments and the "---" line before it are not part
	// of it), its opening brace in JSON, the line of its entry for an item
	// of a List. Lines are counted by "\n", as editors, grep and git count
	// them.
	Line int
	// KindLine is the line of the object's kind key (Line when unknown):
	// an error about the kind points there, not at the object's first key.
	KindLine int
	// Object is the object as written, with YAML-only types turned into what
	// JSON can hold (see Parse).
	Object *unstructured.Unstructured
}

// Parse parses and validates a manifest, and reports every problem at once,
// in manifest order, so that a person can fix them all in one edit.
//
// A manifest whose first character other than white space is '[' or '{' is
// JSON: one object, an array of objects, or several of those one after the
// other. If it is not valid JSON but is valid YAML (YAML flow style looks
// like JSON), it is read as YAML; otherwise the JSON error is reported.
// Anything else is YAML, documents separated by lines starting with "---"
// (followed by the end of the line, a space or a tab; what follows "--- " on
// that line is part of the next document, as in YAML).
//
// Plain YAML scalars are typed as go.yaml.in/yaml/v3 resolves them: only
// true and false are booleans, as in YAML 1.2 and JSON, so yes, no, on and
// off stay strings (kubectl, reading YAML 1.1, makes them booleans, which
// string fields such as env values and ConfigMap data then reject).
// Integers become int64 (float64 past its range), timestamps stay the
// string they were written as, !!binary values stay their base64 text (what
// a Secret's data holds), and scalars of custom tags ("!ref x") are strings.
// Merge keys ("<<") are supported. Duplicate keys, infinities and NaN are
// errors, as JSON has no place for them; duplicate keys of JSON objects are
// errors too.
//
// Each object must have a non-empty string apiVersion that parses as
// "version" or "group/version", a non-empty string kind, and a metadata
// object with a non-empty string name: generateName alone is not enough, as
// Vidra needs a name known in advance to prune and to correct drift. Names
// and namespaces are otherwise left to the API server, which knows the rules
// of each kind, except that "/", "." and ".." can never be valid and would
// break the keys objects are tracked by. metadata.namespace, if not null,
// must be a string (a null namespace is removed); labels and annotations
// must be maps of strings, since Vidra adds its own to them.
//
// A manifest without any document, or with only comments, is an error: an
// empty manifest must never be taken to mean "prune everything".
//
// Parse returns every object that is valid, even when it reports errors for
// others; a caller must not prune unless the error list is empty. It never
// panics, and its work is bounded by the size of the manifest.
func Parse(manifest string) ([]Object, ErrorList) {
	if len(manifest) > MaxManifestBytes {
		return nil, ErrorList{{
			Index:   -1,
			Reason:  ReasonManifestTooLarge,
			Message: fmt.Sprintf("manifest is %d bytes, over the limit of %d bytes (3 MiB)", len(manifest), MaxManifestBytes),
		}}
	}
	// Strings reaching Vidra through the API server are valid UTF-8. Anything
	// else is refused here rather than guessed at: the YAML parser would
	// take a UTF-16 byte order mark as a reason to decode the rest as
	// UTF-16, and encoding/json would silently replace bad bytes.
	if i := firstInvalidUTF8(manifest); i >= 0 {
		return nil, ErrorList{{
			Index:   -1,
			Line:    1 + strings.Count(manifest[:i], "\n"),
			Reason:  ReasonInvalidManifest,
			Message: "manifest is not valid UTF-8",
		}}
	}
	// A byte order mark is not white space, neither for the JSON check nor
	// for encoding/json; it is on line 1, so dropping it moves no line.
	body := strings.TrimPrefix(manifest, "\uFEFF")

	p := newParser(len(body), false)
	if looksLikeJSON(body) {
		p.parseJSON([]byte(body))
		if p.syntaxError {
			// YAML flow style looks like JSON, and JSON documents may be
			// separated by "---". Such a manifest is read as YAML, but only
			// if it is entirely valid: otherwise the author most likely meant
			// JSON, and the JSON error is the one that helps.
			y := newParser(len(body), true)
			y.parseYAML(body)
			if len(y.errs) == 0 && y.next > 0 {
				p = y
			}
		}
	} else {
		p.parseYAML(body)
	}
	return p.finish()
}

// firstInvalidUTF8 returns the offset of the first byte of s that is not
// part of valid UTF-8, or -1.
func firstInvalidUTF8(s string) int {
	if utf8.ValidString(s) {
		return -1
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return -1
}

// looksLikeJSON tells whether the first character other than white space
// opens a JSON object or array.
func looksLikeJSON(s string) bool {
	t := strings.TrimLeft(s, " \t\r\n")
	return t != "" && (t[0] == '{' || t[0] == '[')
}

// parser accumulates the objects and errors of one manifest.
type parser struct {
	objs []Object
	errs ErrorList
	// next is the index the next document takes.
	next int
	// syntaxError is set when the input could not be parsed at all as what
	// it was read as (as opposed to parsing into invalid objects).
	syntaxError bool
	// jsonArrays makes a YAML document that is a list a list of documents,
	// as a top-level JSON array is, for JSON-looking manifests read as YAML.
	jsonArrays bool
	// full is set once parsing stops: maxErrors errors were collected, or
	// the manifest holds more than MaxObjects objects or maxDocuments
	// documents.
	full bool
	// documents counts the YAML documents and top-level JSON values read.
	documents int
	// nodes is the weight of the parts of the manifest decoded so far, as
	// nodeWeight counts it, against MaxNodes.
	nodes int
	// aliasLimit is what YAML aliases may expand to in this manifest, and
	// aliasBudget what they may still expand to.
	aliasLimit, aliasBudget int
	// noun names the text in messages: "manifest", or "document" for
	// DocumentJSON.
	noun string
}

// newParser returns a parser for a manifest of size bytes.
func newParser(size int, jsonArrays bool) *parser {
	limit := min(maxAliasExpansion, minAliasExpansion+size)
	return &parser{aliasLimit: limit, aliasBudget: limit, jsonArrays: jsonArrays, noun: "manifest"}
}

// position locates a decoded value in the manifest, for Object.Line and for
// errors.
type position interface {
	// line is the 1-based line where the value starts.
	line() int
	// fieldLine is the line of the key of the field at path, 0 when unknown.
	fieldLine(path ...string) int
	// item is the position of element i of the value's items list, nil when
	// unknown.
	item(i int) position
}

// fixedPosition is a position known only by its line, for an item whose
// own position cannot be found.
type fixedPosition int

func (p fixedPosition) line() int               { return int(p) }
func (p fixedPosition) fieldLine(...string) int { return 0 }
func (p fixedPosition) item(int) position       { return nil }

// takeIndex returns the index of the next document, which starts on line.
// Past MaxObjects it reports the manifest too large, stops parsing and
// returns false.
func (p *parser) takeIndex(line int) (int, bool) {
	if p.full {
		return 0, false
	}
	if p.next == MaxObjects {
		p.tooLarge(p.next, line, fmt.Sprintf("manifest holds more than %d objects, the most one VidraResource may manage (its inventory must fit in its status); split the objects over several VidraResources", MaxObjects))
		return 0, false
	}
	i := p.next
	p.next++
	return i, true
}

// readDocument counts a document (or top-level JSON value) starting on line
// and tells whether there is room for it; past maxDocuments it reports the
// manifest too large and stops parsing.
func (p *parser) readDocument(line int) bool {
	if p.full {
		return false
	}
	if p.documents == maxDocuments {
		p.tooLarge(-1, line, fmt.Sprintf("manifest holds more than %d documents, counting empty ones; remove the empty documents or split the objects over several VidraResources", maxDocuments))
		return false
	}
	p.documents++
	return true
}

// tooLarge reports a limit of the manifest reached at document index (-1
// when the document takes no index), on line, and stops parsing: what
// follows is not looked at.
func (p *parser) tooLarge(index, line int, msg string) {
	p.add(&Error{Index: index, Line: line, Reason: ReasonManifestTooLarge, Message: msg})
	p.full = true
}

// invalid records an InvalidManifest error.
func (p *parser) invalid(index, line int, field, format string, args ...any) {
	p.add(&Error{Index: index, Line: line, Field: field, Reason: ReasonInvalidManifest, Message: fmt.Sprintf(format, args...)})
}

func (p *parser) add(e *Error) {
	if p.full {
		return
	}
	if len(p.errs) == maxErrors {
		p.full = true
		p.errs = append(p.errs, &Error{
			Index:   -1,
			Reason:  ReasonInvalidManifest,
			Message: fmt.Sprintf("more than %d errors; stopped looking for more", maxErrors),
		})
		return
	}
	p.errs = append(p.errs, e)
}

// finish reports an empty manifest and puts the errors in manifest order.
func (p *parser) finish() ([]Object, ErrorList) {
	if p.next == 0 && !p.full {
		p.add(&Error{
			Index:   -1,
			Reason:  ReasonInvalidManifest,
			Message: "manifest holds no objects; an empty manifest is refused so that it can never prune every object",
		})
	}
	sortErrors(p.errs)
	return p.objs, p.errs
}

// value takes one decoded top-level value (a document, a JSON array element
// or a List item): it flattens Lists, validates objects and keeps the valid
// ones.
func (p *parser) value(v any, pos position, isItem bool) {
	if p.full {
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		what := "document"
		if isItem {
			what = "item"
		}
		if index, ok := p.takeIndex(pos.line()); ok {
			p.invalid(index, pos.line(), "", "%s is not an object but %s", what, describe(v))
		}
		return
	}
	if items, isList := listItems(m); isList {
		for i, item := range items {
			if p.full {
				return
			}
			ipos := pos.item(i)
			if ipos == nil {
				ipos = fixedPosition(pos.line())
			}
			p.value(item, ipos, true)
		}
		return
	}
	index, ok := p.takeIndex(pos.line())
	if !ok {
		return
	}
	if kind, _ := m["kind"].(string); kind == "List" {
		p.invalid(index, lineOr(pos.fieldLine("items"), pos.line()), "items", "a List must have an items list")
		return
	}
	if !p.validate(m, index, pos) {
		return
	}
	p.objs = append(p.objs, Object{Index: index, Line: pos.line(), KindLine: lineOr(pos.fieldLine("kind"), pos.line()), Object: &unstructured.Unstructured{Object: m}})
}

// listItems returns the items of a List. Like kubectl, Vidra takes any kind
// ending in "List" with an items array for a list of objects, so that the
// output of `kubectl get -o yaml` can be used as a manifest.
func listItems(m map[string]any) ([]any, bool) {
	kind, _ := m["kind"].(string)
	if !strings.HasSuffix(kind, "List") {
		return nil, false
	}
	items, ok := m["items"].([]any)
	return items, ok
}

func lineOr(line, fallback int) int {
	if line > 0 {
		return line
	}
	return fallback
}

// describe names the JSON type of a value, for messages.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// DocumentJSON turns text, one YAML or JSON document that is not a manifest
// (a kubeconfig from a tenant's Secret), into JSON, under the bounds Parse
// applies to manifests, so that no YAML library ever has to read it again:
// at most maxNodes nodes, counted by nodeWeight before any decoder runs;
// aliases expanding to no more than a manifest of the same size may, nesting
// no deeper than maxDepth, no duplicate keys, valid UTF-8. Scalars are typed
// as Parse types them (YAML 1.2: yes and no stay strings). The size of text
// is the caller's to bound; its work and memory here grow with maxNodes and
// that size only.
//
// A document over maxNodes is refused with an *Error of reason
// ReasonManifestTooLarge, other problems with an *Error or an ErrorList of
// ReasonInvalidManifest, located by line.
//
// An empty document (nothing, comments, null) gives "null". Text holding more
// than one document with content is refused: a document after the first
// would be silently ignored by a YAML-reading consumer.
func DocumentJSON(text string, maxNodes int) ([]byte, error) {
	if i := firstInvalidUTF8(text); i >= 0 {
		return nil, &Error{Index: -1, Line: 1 + strings.Count(text[:i], "\n"), Reason: ReasonInvalidManifest, Message: "not valid UTF-8"}
	}
	text = strings.TrimPrefix(text, "\uFEFF")
	if _, over := nodeWeight(text, maxNodes); over >= 0 {
		return nil, &Error{Index: -1, Line: 1 + strings.Count(text[:over], "\n"), Reason: ReasonManifestTooLarge, Message: fmt.Sprintf(
			"holds more than %d nodes (keys, values and list items, counted from its brackets, commas, dashes and colons)", maxNodes)}
	}
	if looksLikeJSON(text) && json.Valid([]byte(text)) {
		// JSON has no aliases: what is left to check is what the JSON
		// decoders would let through.
		raw := []byte(strings.TrimSpace(text))
		if errs := jsonShapeErrors(raw, 0); len(errs) > 0 {
			for _, e := range errs {
				e.Index = -1
			}
			return nil, ErrorList(errs)
		}
		return raw, nil
	}

	p := newParser(len(text), false)
	p.noun = "document"
	c := chunk{text: text, line: 1, content: true}
	lines := newLineMap(c)
	dec := yaml.NewDecoder(strings.NewReader(text))
	var root *yaml.Node
	for {
		var doc yaml.Node
		err := decodeNode(dec, &doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			line, msg := yamlErrorPosition(err, c, lines)
			return nil, &Error{Index: -1, Line: line, Reason: ReasonInvalidManifest, Message: "invalid YAML: " + msg}
		}
		if len(doc.Content) == 0 || (doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].ShortTag() == "!!null") {
			continue
		}
		if root != nil {
			return nil, &Error{Index: -1, Line: lines.line(doc.Line), Reason: ReasonInvalidManifest, Message: "a second YAML document; only one is read, remove the others"}
		}
		root = doc.Content[0]
	}
	if root == nil {
		return []byte("null"), nil
	}
	conv := converter{p: p, lines: lines}
	v := conv.value(root, nil, 0)
	if len(conv.errs) > 0 {
		errs := ErrorList(conv.errs)
		for _, e := range errs {
			e.Index = -1
		}
		sortErrors(errs)
		return nil, errs
	}
	return json.Marshal(v)
}

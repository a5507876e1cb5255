// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import "fmt"

// MaxNodes bounds the nodes (keys, values, list items, lists and maps) a
// manifest may hold, as nodeWeight counts them, before any decoder builds
// them.
//
// go.yaml.in/yaml/v3 builds the node tree of a whole document before Vidra
// sees any of it: about 175 bytes live per node (a yaml.Node and its slot
// in its parent) and about 250 allocated, plus about 40 bytes per node for
// the converted object. Without a cap, a 1.5 MiB "[0,0,0,...]" is 750,000
// nodes and 344 MiB allocated, and eight workers parsing such manifests at
// once take the operator past its 256 MiB memory limit.
//
// With the cap, one parse holds at most 120,000 × (175 + 40) B ≈ 25 MiB live
// and allocates at most about 120,000 × 450 B ≈ 52 MiB in all, however the
// manifest is written; eight workers parsing the worst manifests at once
// hold about 200 MiB, leaving the rest of 256 MiB to the operator's own heap
// (its informer caches) and the runtime. Real manifests are well below it:
// 1000 objects (Deployments, Services and ConfigMaps, 0.5 MiB) weigh about
// 64,000 and a 1 MiB CustomResourceDefinition about 77,000.
const MaxNodes = 120000

// nodeWeight returns an upper bound of the nodes the YAML or JSON text s
// decodes to, and the offset at which the bound passes limit (-1 if it does
// not). It reads s once and allocates nothing.
//
// The bound must hold for whatever s is, since s is tenant input, so it does
// not follow what the YAML scanner would (whether a quote opens a string, a
// '#' a comment, a '|' a block scalar): a mistake there would let a dense
// list pass unseen, hidden in what the count took for a string. It counts
// the indicators every node needs one of instead, wherever they stand:
//
// every node but a document's is the root of a document or fills a slot of
// its parent (a list or a map fills the slot it is the value of, so it needs
// none of its own), and slots are only made by:
//
//   - a flow collection's entries, the first after its '[' or '{' and the
//     others after a ','; an entry is at most three slots (a single-pair
//     mapping "[a: b]": the mapping, its key, its value), so '[', '{' and
//     ',' weigh 3, and a ':' in flow needs nothing more;
//   - a block sequence entry, after "- ": 1;
//   - a block mapping entry, a key and a value around ": " or after "? ":
//     2 each;
//   - a document, its node and its root: 2 for the start of s and for each
//     "---" or "..." at the start of a line.
//
// Indicators in strings, comments and block scalars count too, which
// over-counts prose by a few nodes per line; only an absurdly dense
// manifest reaches MaxNodes through that.
func nodeWeight[T string | []byte](s T, limit int) (weight, over int) {
	weight = 2
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[', '{', ',':
			weight += 3
		case '-':
			if blankOrEnd(s, i+1) {
				weight++
			}
			if atLineStart(s, i) && i+2 < len(s) && s[i+1] == '-' && s[i+2] == '-' && blankOrEnd(s, i+3) {
				weight += 2
			}
		case '.':
			if atLineStart(s, i) && i+2 < len(s) && s[i+1] == '.' && s[i+2] == '.' && blankOrEnd(s, i+3) {
				weight += 2
			}
		case ':', '?':
			if blankOrEnd(s, i+1) {
				weight += 2
			}
		}
		if weight > limit {
			return weight, i
		}
	}
	return weight, -1
}

// blankOrEnd tells whether s has white space, a line break or its end at
// offset i, as the YAML scanner requires after a block indicator. Its
// line breaks include NEL, LS and PS, and it takes a NUL for the end.
func blankOrEnd[T string | []byte](s T, i int) bool {
	if i >= len(s) {
		return true
	}
	switch s[i] {
	case ' ', '\t', '\n', '\r', 0:
		return true
	case 0xC2: // NEL is C2 85
		return i+1 < len(s) && s[i+1] == 0x85
	case 0xE2: // LS and PS are E2 80 A8 and E2 80 A9
		return i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9)
	}
	return false
}

// atLineStart tells whether offset i of s starts a line, after any of the
// YAML scanner's line breaks.
func atLineStart[T string | []byte](s T, i int) bool {
	switch {
	case i == 0 || s[i-1] == '\n' || s[i-1] == '\r':
		return true
	case i >= 2 && s[i-2] == 0xC2 && s[i-1] == 0x85:
		return true
	default:
		return i >= 3 && s[i-3] == 0xE2 && s[i-2] == 0x80 && (s[i-1] == 0xA8 || s[i-1] == 0xA9)
	}
}

// nodesLeft returns how many of MaxNodes the rest of the manifest may
// still use.
func (p *parser) nodesLeft() int { return MaxNodes - p.nodes }

// spendNodes counts weight, returned by nodeWeight for a part of the
// manifest about to be decoded, against MaxNodes. When nodeWeight ran over
// (over >= 0), it reports the manifest too large at line, where the count
// ran over, for the document that would take the next index, stops parsing
// and returns false.
func (p *parser) spendNodes(weight, over, line int) bool {
	if p.full {
		return false
	}
	if over < 0 {
		p.nodes += weight
		return true
	}
	p.tooLarge(p.next, line, fmt.Sprintf("manifest holds more than %d nodes (keys, values and list items, counted from its brackets, commas, dashes and colons), more than one VidraResource may safely hold; split it over several VidraResources", MaxNodes))
	return false
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"strconv"
	"strings"
)

// fieldPath is the path of a value inside a document, built as a linked list
// so that descending costs nothing until an error needs the path as text.
type fieldPath struct {
	parent  *fieldPath
	key     string
	index   int
	isIndex bool
}

func (f *fieldPath) child(key string) *fieldPath { return &fieldPath{parent: f, key: key} }
func (f *fieldPath) elem(i int) *fieldPath       { return &fieldPath{parent: f, index: i, isIndex: true} }

// Bounds on the rendering of a path. Every error inside a document carries
// its path, and a document may hold up to maxErrors errors at the bottom of
// a deep structure or below a huge key: rendered whole, the paths would cost
// their depth times the errors. A person finds the field from its first and
// last segments and the line anyway.
const (
	// pathHead and pathTail are the segments kept from the root and from
	// the leaf of a path longer than both; "…" stands for the rest.
	pathHead, pathTail = 6, 10
	// maxKeyBytes is the longest key written out; longer ones are cut and
	// end with "…".
	maxKeyBytes = 64
)

// String renders the path the way kubectl explain and the API server's
// field errors do: spec.containers[0].image, with keys that are not plain
// words quoted: metadata.labels["app.kubernetes.io/name"]. A long path keeps
// its first and last segments (a[0][0]…[0].b), a long key its start.
func (f *fieldPath) String() string {
	depth := 0
	for p := f; p != nil; p = p.parent {
		depth++
	}
	// segs holds the segments written, root first: all of them, or the
	// first pathHead and the last pathTail.
	var segs [pathHead + pathTail]*fieldPath
	elided := depth > len(segs)
	i := depth - 1 // position of p from the root
	for p := f; p != nil; p, i = p.parent, i-1 {
		switch {
		case !elided || i < pathHead:
			segs[i] = p
		case i >= depth-pathTail:
			segs[pathHead+i-(depth-pathTail)] = p
		}
	}
	var b strings.Builder
	for j, p := range segs[:min(depth, len(segs))] {
		if elided && j == pathHead {
			b.WriteString("…")
		}
		if p.isIndex {
			b.WriteString("[" + strconv.Itoa(p.index) + "]")
			continue
		}
		appendKey(&b, p.key)
	}
	return b.String()
}

// appendKey appends key to a path being built in b, cut to maxKeyBytes.
func appendKey(b *strings.Builder, key string) {
	if len(key) > maxKeyBytes {
		key = strings.ToValidUTF8(key[:maxKeyBytes], "") + "…"
	}
	if !plainKey(key) {
		b.WriteString("[" + strconv.Quote(key) + "]")
		return
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.WriteString(key)
}

// joinKey returns the path of key inside path.
func joinKey(path, key string) string {
	var b strings.Builder
	b.WriteString(path)
	appendKey(&b, key)
	return b.String()
}

// plainKey tells whether key can be written after a dot without ambiguity.
func plainKey(key string) bool {
	if key == "" {
		return false
	}
	for _, r := range key {
		if !(r == '_' || r == '-' || r == '$' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

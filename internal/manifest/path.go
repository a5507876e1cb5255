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

// String renders the path the way kubectl explain and the API server's
// field errors do: spec.containers[0].image, with keys that are not plain
// words quoted: metadata.labels["app.kubernetes.io/name"].
func (f *fieldPath) String() string {
	var parts []*fieldPath
	for p := f; p != nil; p = p.parent {
		parts = append(parts, p)
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		if p.isIndex {
			b.WriteString("[" + strconv.Itoa(p.index) + "]")
			continue
		}
		appendKey(&b, p.key)
	}
	return b.String()
}

// appendKey appends key to a path being built in b.
func appendKey(b *strings.Builder, key string) {
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

package manifest

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParse measures Parse on manifests of MaxObjects small objects, on
// 1000 objects of the size people write, and on a large
// CustomResourceDefinition.
func BenchmarkParse(b *testing.B) {
	var yamlDocs, jsonList strings.Builder
	jsonList.WriteString(`{"apiVersion": "v1", "kind": "List", "items": [`)
	for i := range MaxObjects {
		fmt.Fprintf(&yamlDocs, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\n  labels: {app: web}\ndata:\n  key: value\n---\n", i)
		if i > 0 {
			jsonList.WriteString(",\n")
		}
		fmt.Fprintf(&jsonList, `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c%d", "labels": {"app": "web"}}, "data": {"key": "value"}}`, i)
	}
	jsonList.WriteString("]}")

	for _, bm := range []struct {
		name     string
		manifest string
	}{
		{"yaml documents", yamlDocs.String()},
		{"json list", jsonList.String()},
		{"1000 objects", realisticObjects(1000)},
		{"1 MiB CRD", bigCRD(1 << 20)},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(int64(len(bm.manifest)))
			b.ReportAllocs()
			for b.Loop() {
				if _, errs := Parse(bm.manifest); len(errs) > 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}

// BenchmarkParseDense measures Parse on the densest manifest of the largest
// size the API server allows: refused by the node cap, it should cost
// little.
func BenchmarkParseDense(b *testing.B) {
	manifest := configMapHeader + "data: [" + strings.Repeat("0,", 768<<10) + "0]\n"
	b.SetBytes(int64(len(manifest)))
	b.ReportAllocs()
	for b.Loop() {
		Parse(manifest)
	}
}

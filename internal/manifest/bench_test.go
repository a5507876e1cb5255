// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

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

// manyProblems returns manifests of about 1 MB, each with n problems of one
// kind, all past the error cap: keys given twice, labels that are not
// strings, annotations of Vidra's prefix it does not know. Finding a
// problem's line once cost a walk of its mapping each, n² in all.
func manyProblems(n int) map[string]string {
	var dups, labels, annotations strings.Builder
	dups.WriteString(configMapHeader + "data:\n")
	for range 2 {
		for i := range n {
			fmt.Fprintf(&dups, "  key-%024d: v\n", i)
		}
	}
	labels.WriteString(configMapHeader + "  labels:\n")
	annotations.WriteString(configMapHeader + "  annotations:\n")
	for i := range n {
		fmt.Fprintf(&labels, "    l%024d: 1\n", i)
		fmt.Fprintf(&annotations, "    vidra.infrahub.operators.com/x%07d: a\n", i)
	}
	return map[string]string{"keys given twice": dups.String(), "labels not strings": labels.String(), "unknown annotations": annotations.String()}
}

// BenchmarkParseManyProblems measures Parse on manyProblems(20000): each
// should cost what a valid manifest of its size does, not seconds.
func BenchmarkParseManyProblems(b *testing.B) {
	for name, manifest := range manyProblems(20000) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(manifest)))
			b.ReportAllocs()
			for b.Loop() {
				if _, errs := Parse(manifest); len(errs) == 0 {
					b.Fatal("accepted")
				}
			}
		})
	}
}

// BenchmarkParseNestedLists measures Parse on a List nested 300 times
// around one ConfigMap of 1 MiB: each level once read the whole value
// again, 1.5 GB and seconds.
func BenchmarkParseNestedLists(b *testing.B) {
	manifest := nestedLists(300, 1<<20)
	b.SetBytes(int64(len(manifest)))
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := Parse(manifest); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

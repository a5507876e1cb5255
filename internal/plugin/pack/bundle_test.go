// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package pack

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vidra-operator/vidra/internal/manifestfrom"
)

func TestSplitDocuments(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string
	}{
		{name: "one", text: "a: 1\n", want: []string{"a: 1\n"}},
		{name: "two", text: "a: 1\n---\nb: 2\n", want: []string{"a: 1\n", "b: 2\n"}},
		{name: "leading separator", text: "---\na: 1\n", want: []string{"a: 1\n"}},
		{name: "content after the separator", text: "a: 1\n--- # c\nb: 2\n", want: []string{"a: 1\n", "# c\nb: 2\n"}},
		{name: "not a separator", text: "a: |\n  ---\n----\n", want: []string{"a: |\n  ---\n----\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, splitDocuments(tt.text)); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestBundleSplitsIntoConfigMapsThatJoinToTheManifest(t *testing.T) {
	// Documents of random numbers: they compress about 2 times, so 2.6 MB
	// needs more than one ConfigMap.
	rng := rand.New(rand.NewPCG(1, 2))
	var docs []string
	for i := range 1000 {
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\ndata:\n", i)
		for j := range 100 {
			fmt.Fprintf(&b, "  k%d: \"%x\"\n", j, rng.Uint64())
		}
		docs = append(docs, b.String())
	}
	text := strings.Join(docs, "---\n")
	chunks, err := Bundle(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) < 2 {
		t.Fatalf("%d chunks of %d bytes, want several", len(chunks), len(text))
	}
	var parts []string
	n := 0
	for _, c := range chunks {
		if len(c.Gzip) > MaxChunkBytes {
			t.Errorf("a chunk holds %d bytes of gzip, over %d", len(c.Gzip), MaxChunkBytes)
		}
		out, err := manifestfrom.Decode(".gz", c.Gzip, 3<<20)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(out))
		n += c.Documents
	}
	if n != len(docs) || strings.Join(parts, "---\n") != text {
		t.Errorf("the chunks hold %d documents and do not join to the manifest", n)
	}
}

func TestBundleRefusesAManifestOverTheBound(t *testing.T) {
	if _, err := Bundle(strings.Repeat("# x\n", 1<<20)); err == nil || !strings.Contains(err.Error(), "3 MiB") {
		t.Fatalf("Bundle(4 MiB) = %v, want the bound named", err)
	}
}

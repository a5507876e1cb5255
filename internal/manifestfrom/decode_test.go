// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifestfrom

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"strings"
	"testing"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func gz(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestDecode(t *testing.T) {
	text := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n")
	// 8 MiB of zeros: about 8 KiB of gzip, a thousand times smaller.
	bomb := gz(t, make([]byte, 8<<20))
	// Text that compresses less than MaxRatio times, longer than the budget.
	var lines bytes.Buffer
	for i := range 1 << 16 {
		fmt.Fprintf(&lines, "  item-%d: value-%d\n", i, i*7919)
	}
	long := gz(t, lines.Bytes())
	tests := []struct {
		name    string
		key     string
		data    []byte
		budget  int
		want    []byte
		wantErr error
	}{
		{name: "text is itself", key: "a.yaml", data: text, budget: 1 << 20, want: text},
		{name: "text over the budget", key: "a.yaml", data: text, budget: 10, wantErr: errOverBudget},
		{name: "gzip by magic number", key: "a.yaml", data: gz(t, text), budget: 1 << 20, want: text},
		{name: "gzip by name", key: "a.yaml.gz", data: gz(t, text), budget: 1 << 20, want: text},
		{name: "gzip of exactly the budget", key: "a.gz", data: gz(t, text), budget: len(text), want: text},
		{name: "gzip one byte over the budget", key: "a.gz", data: gz(t, text), budget: len(text) - 1, wantErr: errOverBudget},
		{name: "a bomb is refused by its ratio", key: "bomb.gz", data: bomb, budget: 3 << 20, wantErr: errOverRatio},
		{name: "a bomb is refused by the budget when it is smaller", key: "bomb.gz", data: bomb, budget: 100 << 10, wantErr: errOverBudget},
		{name: "a long text is refused by the budget", key: "long.gz", data: long, budget: 1 << 20, wantErr: errOverBudget},
		{name: "a .gz key that is not gzip", key: "a.gz", data: text, budget: 1 << 20, wantErr: errNotGzip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.key, tt.data, tt.budget)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Decode() = %d bytes, %v; want %v", len(got), err, tt.wantErr)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Fatalf("Decode() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestAssembleBoundsTheSumOfEveryPart(t *testing.T) {
	doc := strings.Repeat("# filler\n", 100) // 900 bytes
	src := Source{Ref: Ref{Kind: KindConfigMap, Name: "bundle"}, Parts: []Part{{Key: "a.yaml", Data: []byte(doc)}, {Key: "b.yaml.gz", Data: gz(t, []byte(doc))}}}
	full, err := Assemble(doc, []Source{src}, 3*len(doc)+2*len("\n---\n"))
	if err != nil || len(full) != 3*len(doc)+10 {
		t.Fatalf("Assemble() = %d bytes, %v; want all three parts", len(full), err)
	}
	_, err = Assemble(doc, []Source{src}, 3*len(doc)+2*len("\n---\n")-1)
	if err == nil || err.Reason != v1alpha1.ReasonManifestTooLarge || !strings.Contains(err.Error(), "ConfigMap bundle: key b.yaml.gz") {
		t.Fatalf("Assemble() one byte over = %v; want ManifestTooLarge naming the key", err)
	}
}

func TestDecodeManifest(t *testing.T) {
	text := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
	if got, err := DecodeManifest(text, "", 1<<20); err != nil || got != text {
		t.Fatalf("plain: %q, %v", got, err)
	}
	enc := "H4sIAAAAAAAA/0osyMgsSy3SS87PS8lMz0lMUSjJSLVSSE1RyE9TSM7PSy1JzVMoSC0qzszPAwQAAP//"
	if _, err := DecodeManifest(enc+"!", v1alpha1.ManifestEncodingGzipBase64, 1<<20); err == nil || err.Reason != v1alpha1.ReasonInvalidManifest {
		t.Fatalf("bad base64: %v, want InvalidManifest", err)
	}
	if _, err := DecodeManifest("dGV4dA==", v1alpha1.ManifestEncodingGzipBase64, 1<<20); err == nil || err.Reason != v1alpha1.ReasonInvalidManifest {
		t.Fatalf("base64 of text: %v, want InvalidManifest", err)
	}
}

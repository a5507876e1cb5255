// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package pack

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"

	"github.com/vidra-operator/vidra/internal/manifest"
	"github.com/vidra-operator/vidra/internal/manifestfrom"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// InlineMax is the largest packed manifest that create writes into
// spec.manifest itself; a larger one goes into gzip-compressed ConfigMaps
// (spec.manifestFrom). Well below the field's bound (768 KiB), so that an
// edit that grows it a little still fits.
const InlineMax = 256 << 10

// MaxChunkBytes bounds the gzip data of one ConfigMap: the API server
// refuses a ConfigMap whose data passes 1 MiB, and the rest is left for
// its metadata.
const MaxChunkBytes = 768 << 10

// Chunk is a part of a manifest, whole documents, and its gzip data.
type Chunk struct {
	// Documents counts the documents of the part.
	Documents int
	// Text is the part's length before compression.
	Text int
	Gzip []byte
}

// Bundle splits text, a packed manifest, into at most
// v1alpha1.MaxManifestSources parts of whole documents, each
// gzip-compressed into at most MaxChunkBytes, as few as fit. Each part
// decompresses within the operator's bounds (checked here, so that what
// create writes is never refused by the operator).
func Bundle(text string) ([]Chunk, error) {
	if len(text) > manifest.MaxManifestBytes {
		return nil, fmt.Errorf("the manifest is %d bytes, over the limit of %d bytes (3 MiB) for a VidraResource, decompressed: split the objects over several VidraResources", len(text), manifest.MaxManifestBytes)
	}
	docs := splitDocuments(text)
	for n := 1; n <= min(len(docs), v1alpha1.MaxManifestSources); n++ {
		chunks, ok, err := bundleInto(docs, len(text), n)
		if err != nil {
			return nil, err
		}
		if ok {
			return chunks, nil
		}
	}
	return nil, fmt.Errorf("the manifest does not fit in %d ConfigMaps of %d bytes of gzip data: split the objects over several VidraResources", v1alpha1.MaxManifestSources, MaxChunkBytes)
}

// bundleInto groups docs into n parts of about the same length and
// compresses them; ok is false when a part's gzip data is over
// MaxChunkBytes.
func bundleInto(docs []string, total, n int) ([]Chunk, bool, error) {
	target := (total + n - 1) / n
	var chunks []Chunk
	var cur []string
	size := 0
	flush := func() error {
		if len(cur) == 0 {
			return nil
		}
		part := strings.Join(cur, "---\n")
		data, err := compress(part)
		if err != nil {
			return err
		}
		if _, err := manifestfrom.Decode(".gz", data, manifest.MaxManifestBytes); err != nil {
			return fmt.Errorf("the packed manifest cannot be compressed within the operator's bounds: %w", err)
		}
		chunks = append(chunks, Chunk{Documents: len(cur), Text: len(part), Gzip: data})
		cur, size = nil, 0
		return nil
	}
	for _, d := range docs {
		if size > 0 && size+len(d) > target && len(chunks) < n-1 {
			if err := flush(); err != nil {
				return nil, false, err
			}
		}
		cur = append(cur, d)
		size += len(d)
	}
	if err := flush(); err != nil {
		return nil, false, err
	}
	for _, c := range chunks {
		if len(c.Gzip) > MaxChunkBytes {
			return nil, false, nil
		}
	}
	return chunks, true, nil
}

// splitDocuments splits text at the lines that separate YAML documents,
// as the operator's parser does, each document keeping its end of line.
func splitDocuments(text string) []string {
	var docs []string
	start := 0
	for i := 0; i < len(text); {
		end := strings.IndexByte(text[i:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += i + 1
		}
		line := strings.TrimRight(text[i:end], "\r\n")
		if line == "---" || strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "---\t") {
			if i > start {
				docs = append(docs, text[start:i])
			}
			// The separator is dropped, Bundle joins with its own; what
			// follows "--- " on its line is the next document's, as in YAML.
			start = end
			if rest := strings.TrimLeft(line[3:], " \t"); rest != "" {
				start = i + len(line) - len(rest)
			}
		}
		i = end
	}
	if start < len(text) {
		docs = append(docs, text[start:])
	}
	return docs
}

func compress(text string) ([]byte, error) {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write([]byte(text)); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

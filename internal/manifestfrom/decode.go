// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifestfrom

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxRatio bounds how many times its compressed size gzip data may expand
// to. Real manifests compress 5 to 25 times (Argo CD's ApplicationSet CRD,
// the most repetitive seen, 24.6 times); gzip itself reaches about 1000
// on a run of one byte, which is what a bomb is made of.
const MaxRatio = 100

// minExpansion lets small gzip data expand to this much whatever its
// ratio: a few hundred bytes of compressed text may expand more than
// MaxRatio times, and this little costs nothing.
const minExpansion = 64 << 10

// gzipMagic starts every gzip stream (RFC 1952).
var gzipMagic = []byte{0x1f, 0x8b}

// IsGzip reports whether data of a key of that name is gzip data: its
// name ends in .gz, or it starts with gzip's magic number. A key named .gz
// that is not gzip is an error of Decode, not text.
func IsGzip(name string, data []byte) bool {
	return strings.HasSuffix(name, ".gz") || bytes.HasPrefix(data, gzipMagic)
}

// errOverBudget is what Decode returns when the text would pass budget,
// and errOverRatio when gzip data expands past MaxRatio.
var (
	errOverBudget = errors.New("over the budget")
	errOverRatio  = fmt.Errorf("over %d times its size (a gzip bomb?); refused", MaxRatio)
	errNotGzip    = errors.New("not gzip data")
)

// Decode returns data as text: data itself, or when it is gzip (IsGzip),
// its decompression. It refuses text longer than budget bytes, and gzip
// data that expands more than MaxRatio times its size (past minExpansion),
// stopping as soon as the output reaches either bound: at most
// min(budget, the ratio's bound)+1 bytes are ever held.
func Decode(name string, data []byte, budget int) ([]byte, error) {
	if !IsGzip(name, data) {
		if len(data) > budget {
			return nil, fmt.Errorf("%d bytes, %w", len(data), errOverBudget)
		}
		return data, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNotGzip, err)
	}
	ratioBound := max(minExpansion, MaxRatio*len(data))
	limit := min(budget, ratioBound)
	var out bytes.Buffer
	// One byte past the limit tells a text of exactly the limit from a
	// longer one without reading further.
	n, err := io.Copy(&out, io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNotGzip, err)
	}
	if n > int64(limit) {
		if limit == ratioBound && limit < budget {
			return nil, fmt.Errorf("%d bytes of gzip data expand to more than %d bytes, %w", len(data), limit, errOverRatio)
		}
		return nil, fmt.Errorf("gzip data expands to more than %d bytes, %w", limit, errOverBudget)
	}
	return out.Bytes(), nil
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wording

import "testing"

func TestBytesSaysALimitInItsLargestWholeUnit(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{
		{0, "0 bytes"},
		{1000, "1000 bytes"},
		{64 << 10, "64 KiB"},
		{1025 << 10, "1025 KiB"},
		{8 << 20, "8 MiB"},
		{1<<20 + 1, "1048577 bytes"},
	} {
		if got := Bytes(tt.n); got != tt.want {
			t.Errorf("Bytes(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wording

import "testing"

func TestCountAndAgree(t *testing.T) {
	for _, tt := range []struct {
		n          int
		count, are string
	}{
		{0, "0 objects", "are"},
		{1, "1 object", "is"},
		{2, "2 objects", "are"},
	} {
		if got := Count(tt.n, "object"); got != tt.count {
			t.Errorf("Count(%d) = %q, want %q", tt.n, got, tt.count)
		}
		if got := Agree(tt.n, "is", "are"); got != tt.are {
			t.Errorf("Agree(%d) = %q, want %q", tt.n, got, tt.are)
		}
	}
}

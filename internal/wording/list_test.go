// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wording

import (
	"slices"
	"strings"
	"testing"
)

func TestListKeepsItsItemsApart(t *testing.T) {
	items := []string{
		"ConfigMap team-a/app: admission webhook denied the request; ConfigMap team-b/victim: forged",
		"Secret team-a/creds: forbidden",
		"",
	}
	got := List(items)
	parts := strings.Split(got, ListSeparator)
	if len(parts) != len(items) {
		t.Fatalf("List(%q) = %q splits into %d items, want %d", items, got, len(parts), len(items))
	}
	want := []string{
		"ConfigMap team-a/app: admission webhook denied the request, ConfigMap team-b/victim: forged",
		"Secret team-a/creds: forbidden",
		"",
	}
	if !slices.Equal(parts, want) {
		t.Errorf("List(%q) splits into %q, want %q", items, parts, want)
	}
	if got := List(nil); got != "" {
		t.Errorf("List(nil) = %q, want empty", got)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub_test

import (
	"testing"

	"github.com/vidra-operator/vidra/internal/infrahub"
)

func TestValidateAt(t *testing.T) {
	for _, tt := range []struct {
		at string
		ok bool
	}{
		{"", true},
		{"2h", true},
		{"30m", true},
		{"45s", true},
		{"1h30m", true},
		{"1h30m15s", true},
		{"0s", true},
		{"2025-01-01", true},
		{"2025-01-01T10:00:00Z", true},
		{"2025-01-01T10:00:00.123456Z", true},
		{"2025-01-01T10:00:00+02:00", true},
		{"2025-01-01T10:00:00", true},
		// Infrahub reads these as "ago" whatever the sign: refused.
		{"now+2h", false},
		{"now-2h", false},
		{"-2h", false},
		{"+2h", false},
		{"in 2h", false},
		// Days are not supported; Infrahub would answer 400.
		{"2d", false},
		{"-2d", false},
		// Infrahub would find "5h" in it.
		{"1.5h", false},
		{"2 hours", false},
		{"2hours", false},
		{"30m2h", false},
		{"h", false},
		{"99999999999h", false},
		{"2025-01-01t10:00:00z", false},
		{"2025-13-01", false},
		{"2025-01-01 10:00:00", false},
		{"yesterday", false},
		{"garbage", false},
	} {
		if err := infrahub.ValidateAt(tt.at); (err == nil) != tt.ok {
			t.Errorf("ValidateAt(%q) = %v, want ok %v", tt.at, err, tt.ok)
		}
	}
}

func TestValidateBranch(t *testing.T) {
	for _, tt := range []struct {
		branch string
		ok     bool
	}{
		{"", true},
		{"main", true},
		{"feature/new-site_2", true},
		{"release-1.2", true},
		{"../admin", false},
		{"a/../b", false},
		{"/main", false},
		{"main/", false},
		{"a//b", false},
		{"a/.hidden", false},
		{".hidden", false},
		{"main.", false},
		{"ref.lock", false},
		{"with space", false},
		{"query?x=1", false},
		{"frag#x", false},
		{"pct%2F", false},
		{"unicodé", false},
		{string(make([]byte, 251)), false},
	} {
		if err := infrahub.ValidateBranch(tt.branch); (err == nil) != tt.ok {
			t.Errorf("ValidateBranch(%q) = %v, want ok %v", tt.branch, err, tt.ok)
		}
	}
}

func TestChangedSince(t *testing.T) {
	for _, tt := range []struct {
		name                      string
		art                       infrahub.Artifact
		lastChecksum, lastStorage string
		want                      bool
	}{
		{"same checksum, no storage ids", infrahub.Artifact{Checksum: "c1"}, "c1", "", false},
		{"same checksum and storage id", infrahub.Artifact{Checksum: "c1", StorageID: "s1"}, "c1", "s1", false},
		{"new checksum", infrahub.Artifact{Checksum: "c2", StorageID: "s1"}, "c1", "s1", true},
		{"new storage id", infrahub.Artifact{Checksum: "c1", StorageID: "s2"}, "c1", "s1", true},
		{"storage id not selected now", infrahub.Artifact{Checksum: "c1"}, "c1", "s1", false},
		{"storage id not known before", infrahub.Artifact{Checksum: "c1", StorageID: "s1"}, "c1", "", false},
		{"nothing applied yet", infrahub.Artifact{Checksum: "c1"}, "", "", true},
		{"no checksum (not rendered)", infrahub.Artifact{}, "c1", "s1", true},
		{"checksum compared exactly", infrahub.Artifact{Checksum: "C1"}, "c1", "", true},
	} {
		if got := tt.art.ChangedSince(tt.lastChecksum, tt.lastStorage); got != tt.want {
			t.Errorf("%s: ChangedSince = %v, want %v", tt.name, got, tt.want)
		}
	}
}

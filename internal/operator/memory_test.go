// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"testing"
)

func TestParseCgroupLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"max\n", 0},
		{"268435456\n", 268435456},
		{"9223372036854771712\n", 0}, // cgroup v1's "no limit", rounded to pages
		{"", 0},
	} {
		got, err := parseCgroupLimit(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseCgroupLimit(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	if _, err := parseCgroupLimit("lots"); err == nil {
		t.Error("a value that is no number was accepted")
	}
}

// TestMemoryLimitPolicy is the choice of the soft memory limit: the
// container's limit when there is one, none otherwise, an explicit value, or
// none at all; GOMEMLIMIT wins over every one of them.
func TestMemoryLimitPolicy(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	parse := func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }
	limited := t.TempDir()
	if err := os.WriteFile(filepath.Join(limited, "memory.max"), []byte("268435456\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unlimited := t.TempDir()
	if err := os.WriteFile(filepath.Join(unlimited, "memory.max"), []byte("max\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want, root string
		limit            int64
		err              bool
	}{
		{name: "auto takes 90% of the container's limit", want: "auto", root: limited, limit: 241591910},
		{name: "auto without a container limit sets none", want: "auto", root: unlimited},
		{name: "auto without a cgroup file system sets none", want: "auto", root: filepath.Join(unlimited, "absent")},
		{name: "off", want: "off", root: limited},
		{name: "an explicit value", want: "104857600", root: limited, limit: 104857600},
		{name: "a value that is no quantity", want: "lots", root: limited, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", "")
			os.Unsetenv("GOMEMLIMIT")
			limit, source, err := MemoryLimit(tc.want, parse, tc.root)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if limit != tc.limit {
				t.Fatalf("limit = %d (%s), want %d", limit, source, tc.limit)
			}
			if tc.limit > 0 && debug.SetMemoryLimit(-1) != tc.limit {
				t.Fatalf("the runtime's limit is %d, want %d", debug.SetMemoryLimit(-1), tc.limit)
			}
		})
	}
	t.Run("GOMEMLIMIT wins", func(t *testing.T) {
		t.Setenv("GOMEMLIMIT", "300MiB")
		if _, source, _ := MemoryLimit("104857600", parse, limited); source != "GOMEMLIMIT" {
			t.Fatalf("source = %q, want GOMEMLIMIT", source)
		}
	})
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"fmt"
	"testing"

	"k8s.io/client-go/tools/cache"
)

func TestBucketIsStableAndInRange(t *testing.T) {
	seen := map[int]bool{}
	for i := range 5000 {
		key := cache.ObjectName{Namespace: fmt.Sprintf("ns-%d", i%50), Name: fmt.Sprintf("app-%d", i)}
		b := Bucket(key)
		if b < 0 || b >= Buckets || Bucket(key) != b {
			t.Fatalf("Bucket(%v) = %d", key, b)
		}
		seen[b] = true
	}
	if len(seen) != Buckets {
		t.Errorf("5,000 keys fell into %d of %d buckets", len(seen), Buckets)
	}
	// The separator matters: a/bc and ab/c are different resources.
	if Bucket(cache.ObjectName{Namespace: "a", Name: "bc"}) == Bucket(cache.ObjectName{Namespace: "ab", Name: "c"}) &&
		Bucket(cache.ObjectName{Namespace: "x", Name: "yz"}) == Bucket(cache.ObjectName{Namespace: "xy", Name: "z"}) {
		t.Error("namespace and name are not separated in the hash")
	}
}

func members(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("vidra-%d", i)
	}
	return out
}

func TestSharesAreEvenAndOnlyTheChangedMembersBucketsMove(t *testing.T) {
	for n := 1; n <= 8; n++ {
		view := members(n)
		counts := map[string]int{}
		for b := range Buckets {
			counts[Owner(b, view)]++
		}
		for _, m := range view {
			if share, even := counts[m], Buckets/n; share < even*6/10 || share > even*14/10 {
				t.Errorf("%d members: %s owns %d buckets, want about %d", n, m, share, even)
			}
		}
	}
	three, four := members(3), members(4)
	for b := range Buckets {
		before, after := Owner(b, three), Owner(b, four)
		if before != after && after != "vidra-3" {
			t.Errorf("bucket %d moved from %s to %s when vidra-3 joined", b, before, after)
		}
	}
	without1 := []string{"vidra-0", "vidra-2"}
	for b := range Buckets {
		before, after := Owner(b, three), Owner(b, without1)
		if before != after && before != "vidra-1" {
			t.Errorf("bucket %d moved from %s to %s when vidra-1 left", b, before, after)
		}
	}
}

func TestOwnedPartitionsTheBuckets(t *testing.T) {
	view := members(3)
	owner := map[int]string{}
	for _, m := range view {
		for _, b := range Owned(m, view) {
			if prev, ok := owner[b]; ok {
				t.Fatalf("bucket %d owned by %s and %s", b, prev, m)
			}
			owner[b] = m
		}
	}
	if len(owner) != Buckets {
		t.Fatalf("%d of %d buckets owned", len(owner), Buckets)
	}
}

func TestLeaseNamesAreValid(t *testing.T) {
	for in, want := range map[string]string{
		"vidra-7d9f-abc12": "vidra-member-vidra-7d9f-abc12",
		"Host_Name:1":      "vidra-member-host-name-1",
	} {
		if got := leaseName(in); got != want {
			t.Errorf("leaseName(%q) = %q, want %q", in, got, want)
		}
	}
}

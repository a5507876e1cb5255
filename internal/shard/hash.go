// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"hash/fnv"
	"strconv"

	"k8s.io/client-go/tools/cache"
)

// Buckets is the number of buckets VidraResources fall into. Managed
// objects carry their owner's bucket as a label, so that a member's
// informers select the objects of its buckets only; 256 keeps that
// selector short and the shares even for any sensible number of members.
const Buckets = 256

// Bucket is the bucket of the VidraResource key: stable for its life,
// whatever the members.
func Bucket(key cache.ObjectName) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key.Namespace))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(key.Name))
	return int(h.Sum32() % Buckets)
}

// BucketLabel is the value of the bucket label for key.
func BucketLabel(key cache.ObjectName) string { return strconv.Itoa(Bucket(key)) }

// Owner returns the member that owns bucket b: the one with the highest
// weight for it. members must not be empty.
func Owner(b int, members []string) string {
	var best string
	var bestWeight uint64
	for _, m := range members {
		if w := weight(m, b); best == "" || w > bestWeight || (w == bestWeight && m < best) {
			best, bestWeight = m, w
		}
	}
	return best
}

// weight is the member's rendezvous weight for a bucket. FNV alone mixes
// its last bytes poorly; the finaliser of SplitMix64 spreads them.
func weight(member string, b int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0, byte(b), byte(b >> 8)})
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Owned returns the buckets of member in the view members.
func Owned(member string, members []string) []int {
	var out []int
	for b := range Buckets {
		if Owner(b, members) == member {
			out = append(out, b)
		}
	}
	return out
}

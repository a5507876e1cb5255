// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package health

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// FNV-1a, 64 bits (hash/fnv), written out so that hashing two strings
// neither converts them to byte slices nor goes through an interface:
// Digest runs on every status update of every watched object.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// Digest is a hash of the health Of reports for u, status and message. The
// watch registry compares it before and after an update that changed only
// an object's status, and wakes the object's owner only when it differs,
// so that status updates that leave the health as it is (a condition's
// lastUpdateTime refreshed) cost no reconcile while a rollout finishing does.
func Digest(u *unstructured.Unstructured) uint64 {
	s, msg := Of(u)
	h := uint64(fnvOffset64)
	h = fnvString(h, string(s))
	// A separator no status contains keeps ("ab", "c") and ("a", "bc")
	// apart.
	h = fnvByte(h, 0)
	return fnvString(h, msg)
}

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = fnvByte(h, s[i])
	}
	return h
}

func fnvByte(h uint64, b byte) uint64 {
	h ^= uint64(b)
	return h * fnvPrime64
}

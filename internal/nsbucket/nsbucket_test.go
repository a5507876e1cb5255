// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package nsbucket

import (
	"fmt"
	"testing"
	"time"
)

func TestOneNamespacesBurstLeavesAnothersBucketFull(t *testing.T) {
	b := New(1, 5)
	now := time.Unix(1_000_000, 0)
	for i := range 5 {
		if !b.Allow("noisy", now) {
			t.Fatalf("take %d within the burst refused", i)
		}
	}
	if b.Allow("noisy", now) {
		t.Error("a take past the burst allowed")
	}
	// The refused take owes nothing; a reservation owes the next token.
	if d := b.Reserve("noisy", now); d != time.Second {
		t.Errorf("a reservation past the burst waits %v, want 1s", d)
	}
	if !b.Allow("quiet", now) {
		t.Error("another namespace's first take refused")
	}
	if d := b.Reserve("quiet", now); d != 0 {
		t.Errorf("another namespace's reservation within its burst waits %v", d)
	}
	if !b.Allow("noisy", now.Add(3*time.Second)) {
		t.Error("no token after the bucket refilled")
	}
}

// Namespaces that came and went leave no bucket behind once theirs refilled.
func TestFullBucketsAreDropped(t *testing.T) {
	b := New(10, 2)
	now := time.Unix(1_000_000, 0)
	for i := range sweepEvery - 1 {
		b.Allow(fmt.Sprintf("ns-%d", i), now)
	}
	if got := b.Len(); got != sweepEvery-1 {
		t.Fatalf("%d buckets, want %d", got, sweepEvery-1)
	}
	b.Allow("busy", now) // the sweep of this take finds no bucket full
	later := now.Add(time.Second)
	for range sweepEvery {
		b.Allow("busy", later) // the last take's sweep: every bucket but this one refilled
	}
	if got := b.Len(); got != 1 {
		t.Errorf("%d buckets after a sweep, want 1: the busy namespace's", got)
	}
}

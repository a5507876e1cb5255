// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package cachecharge

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecideChargesOnlyDeclaredObjectsToTheirOwnersNamespace(t *testing.T) {
	tests := []struct {
		name string
		obj  Object
		want Decision
	}{
		{"declared by an owner deploying here: full, its namespace pays",
			Object{OwnerNamespace: "team-a", DeploysHere: true, Declared: true}, Decision{Namespace: "team-a"}},
		{"made-up owner: stub, no tenant pays",
			Object{}, Decision{Stub: true}},
		{"made-up owner that claims to be declared: stub",
			Object{DeploysHere: true, Declared: true}, Decision{Stub: true}},
		{"owner labelled its own object it does not declare: stub",
			Object{OwnerNamespace: "team-a", DeploysHere: true}, Decision{Stub: true}},
		{"owner deploys to another cluster (foreign marks on a shared cluster): stub",
			Object{OwnerNamespace: "team-a", Declared: true}, Decision{Stub: true}},
		{"owner deploys elsewhere and does not declare it: stub",
			Object{OwnerNamespace: "team-a"}, Decision{Stub: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Decide(tt.obj)); diff != "" {
				t.Errorf("Decide(%+v) (-want +got):\n%s", tt.obj, diff)
			}
		})
	}
}

func TestBudgetsAreOnePerNamespace(t *testing.T) {
	b := NewBudgets(0)
	if b.MaxBytes() != DefaultNamespaceBytes {
		t.Errorf("default = %d, want %d", b.MaxBytes(), DefaultNamespaceBytes)
	}
	a1, a2, other := b.For("team-a"), b.For("team-a"), b.For("team-b")
	if a1 != a2 || a1 == other {
		t.Error("want one budget per namespace")
	}
	if a1.MaxBytes() != DefaultNamespaceBytes || a1.Name() != "team-a" {
		t.Errorf("budget of team-a: %d bytes, name %q", a1.MaxBytes(), a1.Name())
	}
	if msg, over := b.Exceeded("team-a"); over || msg != "" {
		t.Errorf("an empty budget is exceeded: %q", msg)
	}
	if _, over := b.Exceeded("never-seen"); over {
		t.Error("a namespace without objects is exceeded")
	}
}

func TestExceededNamesTheBudgetAndItsNumbers(t *testing.T) {
	msg := exceededMessage("team-a", 64<<20, 63<<20, 12)
	for _, want := range []string{"namespace team-a", "64.0 MiB", "--namespace-cache-size", "63.0 MiB are cached", "12 more objects"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"testing"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// A resource's first pass leaves its whole inventory unrecorded until its
// status write: once that records it, the resource keeps nothing of it, not
// even the array (1,000 resources of four objects kept 0.4 MiB).
func TestRecordedInventoryLeavesNothingBehind(t *testing.T) {
	inventory := []v1alpha1.ManagedResource{
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "app"},
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team-a", Name: "app"},
	}
	st := &resourceState{}
	st.rememberInventory(nil, inventory, "")
	if len(st.unrecorded) != len(inventory) {
		t.Fatalf("remembered %d entries before the status write, want %d", len(st.unrecorded), len(inventory))
	}

	pass := &Pass{st: st, Out: Outcome{Inventory: inventory[:1]}}
	(&Engine{}).Recorded(pass)
	if len(st.unrecorded) != 1 {
		t.Fatalf("after a status write of part of it: %d entries unrecorded, want 1", len(st.unrecorded))
	}

	pass.Out.Inventory = inventory
	(&Engine{}).Recorded(pass)
	if st.unrecorded != nil {
		t.Fatalf("after the status write of all of it: unrecorded holds an array of %d entries, want none", cap(st.unrecorded))
	}
}

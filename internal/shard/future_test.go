// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// Whoever may write Leases in the operator's namespace can date a renewal
// years ahead. The wait for that member's expiry overflowed into a negative
// one, which made the member's loop run without pause, and the member,
// which never acknowledges a view, stayed in every view for years; a Lease
// under another member's name made that member count twice.
func TestALeaseDatedAheadNeitherSpinsNorLasts(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	m, err := New(Options{Client: fake.NewClientset(), Identity: "a", Namespace: "vidra-system", LeaseDuration: testLease, RenewPeriod: testRenew, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	lease := func(name, holder string, renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "vidra-system", Labels: map[string]string{MemberLabel: "true"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(15)),
				RenewTime: ptr.To(metav1.NewMicroTime(renewed))},
		}
	}
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, l := range []*coordinationv1.Lease{
		lease(leaseName("x"), "x", time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC)),
		lease("vidra-member-impostor", "b", clk.Now()),
		lease(leaseName("b"), "b", clk.Now()),
	} {
		if err := idx.Add(l); err != nil {
			t.Fatal(err)
		}
	}
	m.lister = coordinationlisters.NewLeaseLister(idx)
	next := m.evaluate(context.Background())
	if next < 10*time.Millisecond || next > 16*time.Second {
		t.Errorf("next look in %s, want between 10ms and the Lease's 15s", next)
	}
	if got := viewOf(m); !slices.Equal(got, []string{"b", "x"}) {
		t.Errorf("view %v, want b once and x", got)
	}
	// The dated renewal is never renewed again: x is gone a Lease duration
	// after it was first seen, as a member that stopped renewing.
	clk.Step(16 * time.Second)
	m.evaluate(context.Background())
	if got := viewOf(m); slices.Contains(got, "x") {
		t.Errorf("view %v a Lease duration later, want x gone", got)
	}
}

func viewOf(m *Member) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.view)
}

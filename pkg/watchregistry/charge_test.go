// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestStubKeepsOnlyItsIdentityAndTheNamedMarks: a tenant may put 256 KiB of
// labels and annotations on an object; its stub holds the named marks of
// bounded size and nothing else.
func TestStubKeepsOnlyItsIdentityAndTheNamedMarks(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace("team-a")
	u.SetName("big")
	u.SetUID("1234")
	u.SetResourceVersion("42")
	u.SetLabels(map[string]string{"owner": "uid-1", "other": strings.Repeat("x", 63)})
	u.SetAnnotations(map[string]string{"owned-by": "team-a/app", "huge": strings.Repeat("y", 256<<10), "owned-by-long": strings.Repeat("z", 1<<10)})
	u.Object["data"] = map[string]any{"k": strings.Repeat("d", 900<<10)}

	p, err := markedStub(u, Charge{Stub: true, Labels: []string{"owner"}, Annotations: []string{"owned-by", "owned-by-long"}})
	if err != nil {
		t.Fatal(err)
	}
	if size := cachedSize(p); size > 1<<10 {
		t.Errorf("the stub costs %d bytes, want at most 1 KiB", size)
	}
	got, err := p.unpack()
	if err != nil {
		t.Fatal(err)
	}
	if got.GetName() != "big" || got.GetNamespace() != "team-a" || got.GetUID() != "1234" || got.GetResourceVersion() != "42" || got.GetKind() != "ConfigMap" {
		t.Errorf("identity lost: %v", got.Object)
	}
	if l := got.GetLabels(); len(l) != 1 || l["owner"] != "uid-1" {
		t.Errorf("labels = %v, want the owner's alone", l)
	}
	if a := got.GetAnnotations(); len(a) != 1 || a["owned-by"] != "team-a/app" {
		t.Errorf("annotations = %v, want owned-by alone (a value over %d bytes is dropped)", a, maxStubValue)
	}
	if _, ok := got.Object["data"]; ok {
		t.Error("the stub holds the data")
	}
}

// TestLedgerReservesWithinTheBudgetAndReleases: what a transform sets aside
// counts against the budget until the handler charges it, or the entry
// stops.
func TestLedgerReservesWithinTheBudgetAndReleases(t *testing.T) {
	b := NewBudget(1<<30, MaxBytes(1000))
	l := newLedger()
	p1, p2, p3 := &packed{budget: b}, &packed{budget: b}, &packed{budget: b}
	if !l.reserve(b, p1, 600) {
		t.Fatal("600 of 1000 bytes refused")
	}
	if l.reserve(b, p2, 600) {
		t.Fatal("a second 600 bytes fit in 1000 while the first were set aside")
	}
	if !l.reserve(b, p3, 400) {
		t.Fatal("400 more bytes refused")
	}
	l.settle(p1)
	l.settle(p1) // once only
	if got := b.pending.Load(); got != 400 {
		t.Errorf("pending = %d after settling 600 of 1000, want 400", got)
	}
	l.close()
	if got := b.pending.Load(); got != 0 {
		t.Errorf("pending = %d after the entry stopped, want 0", got)
	}
	if l.reserve(b, p2, 10) {
		t.Error("a closed ledger reserved")
	}
	l.settle(p3) // after close: nothing more to release
	if got := b.pending.Load(); got != 0 {
		t.Errorf("pending = %d, want 0", got)
	}
}

// TestAccountChargesEachObjectToItsBudget: an object held in full is
// charged to the budget Charge named, a stub to the cluster's, and a stub
// refused for lack of room is counted by the budget that refused it.
func TestAccountChargesEachObjectToItsBudget(t *testing.T) {
	cluster := NewBudget(100)
	ns := NewBudget(1<<30, MaxBytes(1<<20))
	a := newAccount(cluster, newLedger())
	full := &packed{budget: ns, body: make([]byte, 1000)}
	full.Name, full.Namespace = "full", "a"
	stub := &packed{stub: true}
	stub.Name, stub.Namespace = "stub", "a"
	refused := &packed{stub: true, refusedBy: ns}
	refused.Name, refused.Namespace = "refused", "a"
	for _, p := range []*packed{full, stub, refused} {
		if handle, over := a.add(p); !handle || over {
			t.Fatalf("add %s: handle %v over %v", p.Name, handle, over)
		}
	}
	if ns.Used() != 1 || ns.UsedBytes() != cachedSize(full) || ns.Refused() != 1 {
		t.Errorf("namespace budget: %d objects, %d bytes, %d refused; want 1, %d, 1", ns.Used(), ns.UsedBytes(), ns.Refused(), cachedSize(full))
	}
	if cluster.Used() != 2 {
		t.Errorf("cluster budget holds %d objects, want the 2 stubs", cluster.Used())
	}
	// The full object becomes a stub: its bytes move to the cluster.
	again := &packed{stub: true, refusedBy: ns}
	again.Name, again.Namespace = "full", "a"
	a.add(again)
	if ns.Used() != 0 || ns.UsedBytes() != 0 || ns.Refused() != 2 || cluster.Used() != 3 {
		t.Errorf("after the object became a stub: namespace %d/%d bytes/%d refused, cluster %d", ns.Used(), ns.UsedBytes(), ns.Refused(), cluster.Used())
	}
	a.remove(refused)
	a.close()
	if ns.Used() != 0 || ns.Refused() != 0 || cluster.Used() != 0 || cluster.UsedBytes() != 0 {
		t.Errorf("after close: namespace %d/%d refused, cluster %d/%d bytes", ns.Used(), ns.Refused(), cluster.Used(), cluster.UsedBytes())
	}
}

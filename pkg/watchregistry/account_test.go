// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"errors"
	"sync/atomic"
	"testing"
)

func stub(ns, name string) *packed {
	p := &packed{}
	p.Namespace, p.Name = ns, name
	return p
}

func TestAccountChargesEachCachedObjectOnce(t *testing.T) {
	b := NewBudget(2)
	a, other := newAccount(b, nil), newAccount(b, nil)
	steps := []struct {
		name       string
		do         func() (handle, over bool)
		wantUsed   int64
		wantHandle bool
		wantOver   bool
	}{
		{"add", func() (bool, bool) { return a.add(stub("ns", "a")) }, 1, true, false},
		{"add again: an update seen as an add", func() (bool, bool) { return a.add(stub("ns", "a")) }, 1, true, false},
		{"same name, other namespace", func() (bool, bool) { return a.add(stub("other", "a")) }, 2, true, false},
		{"delete of an object never cached", func() (bool, bool) { a.remove(stub("ns", "unknown")); return true, false }, 2, true, false},
		{"another account of the budget, over it", func() (bool, bool) { return other.add(stub("ns", "b")) }, 3, false, true},
		{"delete", func() (bool, bool) { a.remove(stub("ns", "a")); return true, false }, 2, true, false},
		{"close refunds what is left", func() (bool, bool) { a.close(); return true, false }, 1, true, false},
		{"add after close is refused", func() (bool, bool) { return a.add(stub("ns", "c")) }, 1, false, false},
		{"close twice", func() (bool, bool) { a.close(); return true, false }, 1, true, false},
	}
	for _, s := range steps {
		handle, over := s.do()
		if handle != s.wantHandle || over != s.wantOver || b.Used() != s.wantUsed {
			t.Fatalf("%s: handle %t, over %t, used %d; want %t, %t, %d", s.name, handle, over, b.Used(), s.wantHandle, s.wantOver, s.wantUsed)
		}
	}
	if newAccount(nil, nil) != nil {
		t.Fatal("a cluster without a budget has an account")
	}
	var none *account
	none.close() // stopping an informer without a budget
}

// Bytes are charged as objects arrive, grow and leave: a server not
// trusted with the operator's memory may send few but large objects, or
// grow small ones by updates.
func TestAccountChargesTheBytesObjectsTake(t *testing.T) {
	sized := func(name string, body int) *packed {
		p := stub("ns", name)
		p.body = make([]byte, body)
		return p
	}
	b := NewBudget(100, MaxBytes(10_000))
	a := newAccount(b, nil)
	one := cachedSize(sized("a", 1000))
	if handle, over := a.add(sized("a", 1000)); !handle || over || b.UsedBytes() != one {
		t.Fatalf("add: handle %t, over %t, %d bytes used; want %d", handle, over, b.UsedBytes(), one)
	}
	if handle, over := a.add(sized("a", 500)); !handle || over || b.UsedBytes() != one-500 {
		t.Fatalf("an update that shrinks: handle %t, over %t, %d bytes used; want %d", handle, over, b.UsedBytes(), one-500)
	}
	if handle, over := a.add(sized("a", 20_000)); handle || !over {
		t.Fatalf("an update that grows over the bytes: handle %t, over %t; want refused, over", handle, over)
	}
	a.remove(sized("a", 0))
	if b.Used() != 0 || b.UsedBytes() != 0 {
		t.Fatalf("after the delete: %d objects, %d bytes used", b.Used(), b.UsedBytes())
	}
	a.add(sized("b", 2000))
	a.add(sized("c", 3000))
	a.close()
	if b.Used() != 0 || b.UsedBytes() != 0 {
		t.Fatalf("after close: %d objects, %d bytes used", b.Used(), b.UsedBytes())
	}
}

func TestBudgetErrorSaysWhichClusterAndHowMany(t *testing.T) {
	for _, tc := range []struct {
		err  BudgetError
		want string
	}{
		{BudgetError{Cluster: "t", Max: 100}, "the caches of cluster t would hold more than 100 objects, the most its budget allows"},
		{BudgetError{Budget: "team-a", Max: 1}, `the caches of the local cluster would hold more than 1 object, the most its budget "team-a" allows`},
		{BudgetError{Cluster: "t", Max: 100, MaxBytes: 64 << 20}, "the caches of cluster t would hold more than 100 objects or 64 MiB, the most its budget allows"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
		if !errors.Is(&tc.err, ErrOverBudget) {
			t.Errorf("%v does not match ErrOverBudget", &tc.err)
		}
	}
	if NewBudget(-1).Max() != 0 {
		t.Error("a negative maximum is not zero")
	}
}

// One crossing of the budget is one trip: the first charge over it claims
// the trip, later ones while it is handled do not, and a charge that found
// the budget over just before the trip closed the account cannot claim it
// again once the trip is over (tripping reset). It used to: the charge
// read "over" before the close and claimed the trip after the reset, which
// counted a second trip, doubled the hold and stopped the cluster's next
// informers.
func TestATripIsClaimedOncePerCrossing(t *testing.T) {
	var tripping atomic.Bool
	b := NewBudget(1)
	a := newAccount(b, nil)
	a.tripping = &tripping
	if handle, over := a.add(stub("ns", "a")); !handle || over {
		t.Fatalf("under the budget: handle %t, over %t", handle, over)
	}
	if _, over := a.add(stub("ns", "b")); !over {
		t.Fatal("the first charge over the budget did not claim the trip")
	}
	if _, over := a.add(stub("ns", "c")); over {
		t.Fatal("a second charge claimed the trip being handled")
	}
	// Registry.overBudget: the account is closed, then tripping reset.
	a.close()
	tripping.Store(false)
	if handle, over := a.add(stub("ns", "d")); handle || over {
		t.Fatalf("a charge after the trip: handle %t, over %t; want it refused, and no trip", handle, over)
	}
	// A fresh start over the budget trips again.
	fresh := newAccount(b, nil)
	fresh.tripping = &tripping
	fresh.add(stub("ns", "e"))
	if _, over := fresh.add(stub("ns", "f")); !over {
		t.Fatal("a new crossing did not claim a trip")
	}
}

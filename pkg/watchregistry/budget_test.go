// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// budgetEnv is a namespace of ConfigMaps that a registry scoped to that
// namespace alone sees, so that all-namespaces informers count only them.
type budgetEnv struct {
	c   clients
	ns  string
	sel string
	clk *testingclock.FakeClock
	rec *recorder
}

func newBudgetEnv(t *testing.T) *budgetEnv {
	t.Helper()
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	return &budgetEnv{c: c, ns: ns, sel: selector + ",budget=" + ns, clk: testingclock.NewFakeClock(time.Now()), rec: &recorder{}}
}

// create creates n ConfigMaps of owner in ns, named prefix-0 and on, in the
// registry's scope.
func (b *budgetEnv) create(t *testing.T, ns, owner, prefix string, n int) {
	t.Helper()
	for i := range n {
		cm := configMap(ns, fmt.Sprintf("%s-%d", prefix, i), owner, nil)
		cm.Labels["budget"] = b.ns
		createConfigMap(t, b.c.cs, cm)
	}
}

func (b *budgetEnv) registry(t *testing.T, opts watchregistry.Options[string]) *watchregistry.Registry[string] {
	t.Helper()
	opts.Enqueue = b.rec.enqueue
	opts.Clock = b.clk
	opts.LabelSelector = b.sel
	return newRegistry(t, b.c, opts)
}

// waitUsed waits until the budget's use is want.
func waitUsed(t *testing.T, b *watchregistry.Budget, want int64) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		return b.Used() == want, nil
	})
	if err != nil {
		t.Fatalf("budget used %d, want %d", b.Used(), want)
	}
}

// waitOverBudget waits until the registry has stopped a cluster over its
// budget n times since New.
func waitOverBudget(t *testing.T, r *watchregistry.Registry[string], n uint64) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		return r.Stats().OverBudget >= n, nil
	})
	if err != nil {
		t.Fatalf("clusters stopped over budget %d times, want %d", r.Stats().OverBudget, n)
	}
}

func stateChanges(ref watchregistry.Ref) func(record) bool {
	return func(r record) bool { return r.ev.Type == watchregistry.EventStateChanged && r.ev.Ref == ref }
}

func TestAClusterListingOverItsBudgetIsStoppedAndHeld(t *testing.T) {
	be := newBudgetEnv(t)
	be.create(t, be.ns, "owner", "cm", 5)
	budget := watchregistry.NewBudget(3, watchregistry.BudgetName("tenant-a"))
	r := be.registry(t, watchregistry.Options[string]{})
	r.SetCluster("tenant", be.c.dyn, be.c.md, watchregistry.WithBudget(budget))
	run(t, r)
	cms := watchregistry.Ref{Cluster: "tenant", GVR: configMaps, Namespace: be.ns}
	secs := watchregistry.Ref{Cluster: "tenant", GVR: secrets, Namespace: be.ns}
	local := watchregistry.Ref{GVR: configMaps, Namespace: be.ns}

	track(t, r, "owner", cms, secs)
	track(t, r, "local-owner", local)
	waitState(t, r, cms, watchregistry.StateOverBudget)
	// Every informer of the cluster stops, not only the one that listed
	// too much, and what their caches held is refunded.
	waitState(t, r, secs, watchregistry.StateOverBudget)
	waitUsed(t, budget, 0)
	_, err := r.Get(cms, be.ns, "cm-0")
	var berr *watchregistry.BudgetError
	if !errors.Is(err, watchregistry.ErrOverBudget) || !errors.As(err, &berr) || berr.Cluster != "tenant" || berr.Max != 3 {
		t.Fatalf("Get of an over-budget ref: %v, want ErrOverBudget with a BudgetError of cluster tenant, max 3", err)
	}
	want := "watch configmaps.v1 in namespace " + be.ns + " of cluster tenant: over the object budget: " +
		`the caches of cluster tenant would hold more than 3 objects, the most its budget "tenant-a" allows`
	if err.Error() != "get "+be.ns+"/cm-0: "+want {
		t.Fatalf("error reads\n  %s\nwant\n  get %s/cm-0: %s", err, be.ns, want)
	}
	rec := be.rec
	rec.waitCount(t, "EventStateChanged of the ConfigMaps", stateChanges(cms), 1)
	snap, _ := r.Snapshot(cms)
	if hold := snap.HeldUntil.Sub(be.clk.Now()); hold != 30*time.Second || !snap.NextRetry.IsZero() {
		t.Fatalf("snapshot: held for %s, next retry %v; want 30s and none without RetryFailed", hold, snap.NextRetry)
	}
	s := r.Stats()
	if s.OverBudget != 1 || s.Informers[watchregistry.StateOverBudget] != 2 || s.Budgets["tenant-a"] != (watchregistry.BudgetUse{Used: 0, Max: 3}) {
		t.Fatalf("stats: %+v", s)
	}

	// The local cluster, without a budget, is not affected.
	waitState(t, r, local, watchregistry.StateSynced)
	if list, err := r.List(local, be.ns, nil); err != nil || len(list) != 5 {
		t.Fatalf("local list: %d objects, %v; want 5", len(list), err)
	}

	// An owner re-tracking on every reconcile does not restart the
	// informers while the cluster is held, nor is it told again; a new ref
	// of the cluster is held too.
	started := r.Stats().Started
	for range 5 {
		track(t, r, "owner", cms, secs)
	}
	other := watchregistry.Ref{Cluster: "tenant", GVR: configMaps, Namespace: "other"}
	track(t, r, "owner", cms, secs, other)
	if st := r.State(other); st != watchregistry.StateOverBudget {
		t.Fatalf("a new ref of a held cluster is %s, want OverBudget", st)
	}
	if got := r.Stats().Started; got != started {
		t.Fatalf("%d informers started while the cluster was held", got-started)
	}

	// Once the hold has passed, Track starts them again: still over, the
	// cluster is held twice as long, and the owner is told of this trip
	// too (it started the informers, and would otherwise take the cluster
	// for watched).
	pos := rec.mark()
	be.clk.Step(30 * time.Second)
	track(t, r, "owner", cms, secs)
	if got := r.Stats().Started; got != started+2 {
		t.Fatalf("Track after the hold started %d informers, want 2", got-started)
	}
	waitOverBudget(t, r, 2)
	snap, _ = r.Snapshot(cms)
	if hold := snap.HeldUntil.Sub(be.clk.Now()); hold != time.Minute {
		t.Fatalf("second hold: %s, want 1m", hold)
	}
	waitUsed(t, budget, 0)
	rec.waitCount(t, "EventStateChanged of the second trip", stateChanges(cms), 2)
	if n := len(filterRecords(rec.since(pos), stateChanges(cms))); n != 1 {
		t.Fatalf("owner told %d times of the second trip, want 1:\n%s", n, rec.dump(pos))
	}
	checkInvariants(t, r)
}

func TestTheHoldDoublesUntilTheClusterSyncsUnderItsBudget(t *testing.T) {
	be := newBudgetEnv(t)
	be.create(t, be.ns, "owner", "cm", 5)
	budget := watchregistry.NewBudget(3)
	r := be.registry(t, watchregistry.Options[string]{RetryFailed: true, RetryMaxDelay: 2 * time.Minute})
	r.SetCluster("tenant", be.c.dyn, be.c.md, watchregistry.WithBudget(budget))
	run(t, r)
	cms := watchregistry.Ref{Cluster: "tenant", GVR: configMaps, Namespace: be.ns}
	track(t, r, "owner", cms)
	waitOverBudget(t, r, 1)

	// The registry retries by itself once each hold has passed, and not
	// before: 30s, 1m, then 2m, the cap. The owner is told of each trip.
	for i, hold := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 2 * time.Minute} {
		snap, _ := r.Snapshot(cms)
		if got := snap.HeldUntil.Sub(be.clk.Now()); got != hold || !snap.NextRetry.Equal(snap.HeldUntil) {
			t.Fatalf("hold %d: %s, next retry at the hold's end %t; want %s", i+1, got, snap.NextRetry.Equal(snap.HeldUntil), hold)
		}
		started := r.Stats().Started
		// Tracking within the hold starts nothing.
		track(t, r, "owner", cms)
		if got := r.Stats().Started; got != started {
			t.Fatalf("hold %d: Track started %d informers", i+1, got-started)
		}
		be.clk.Step(hold)
		waitOverBudget(t, r, uint64(i+2))
		if got := r.Stats().Started; got != started+1 {
			t.Fatalf("hold %d: %d informers started after it, want 1", i+1, got-started)
		}
	}
	be.rec.waitCount(t, "EventStateChanged of every trip", stateChanges(cms), 5)
	if n := be.rec.count(stateChanges(cms)); n != 5 {
		t.Fatalf("owner told %d times of 5 trips:\n%s", n, be.rec.dump(0))
	}

	// Cleaned up below the budget, the cluster syncs after its hold, which
	// resets the backoff: objects added by the watch beyond the budget
	// stop it again, for 30s.
	for i := range 3 {
		if err := be.c.cs.CoreV1().ConfigMaps(be.ns).Delete(context.Background(), fmt.Sprintf("cm-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	be.clk.Step(2 * time.Minute)
	waitState(t, r, cms, watchregistry.StateSynced)
	waitUsed(t, budget, 2)
	pos := be.rec.mark()
	be.create(t, be.ns, "owner", "more", 2)
	waitState(t, r, cms, watchregistry.StateOverBudget)
	snap, _ := r.Snapshot(cms)
	if got := snap.HeldUntil.Sub(be.clk.Now()); got != 30*time.Second {
		t.Fatalf("hold after a sync under budget: %s, want 30s again", got)
	}
	waitUsed(t, budget, 0)
	// A new failure after a success is told again.
	be.rec.waitAfter(t, pos, "EventStateChanged after the adds", stateChanges(cms))
	checkInvariants(t, r)
}

func TestASharedBudgetStopsOnlyTheClusterThatWentOverIt(t *testing.T) {
	be := newBudgetEnv(t)
	nsB := newNamespace(t, be.c.cs)
	be.create(t, be.ns, "owner-a", "a", 2)
	be.create(t, nsB, "owner-b", "b", 2)
	budget := watchregistry.NewBudget(5)
	r := be.registry(t, watchregistry.Options[string]{})
	r.SetCluster("a", be.c.dyn, be.c.md, watchregistry.WithBudget(budget))
	r.SetCluster("b", be.c.dyn, be.c.md, watchregistry.WithBudget(budget))
	run(t, r)
	refA := watchregistry.Ref{Cluster: "a", GVR: configMaps, Namespace: be.ns}
	refB := watchregistry.Ref{Cluster: "b", GVR: configMaps, Namespace: nsB}
	track(t, r, "owner-a", refA)
	track(t, r, "owner-b", refB)
	waitState(t, r, refA, watchregistry.StateSynced)
	waitState(t, r, refB, watchregistry.StateSynced)
	waitUsed(t, budget, 4)

	// B's second add takes the pair to 6 of 5: B stops, A serves on.
	be.create(t, nsB, "owner-b", "more", 2)
	waitState(t, r, refB, watchregistry.StateOverBudget)
	waitUsed(t, budget, 2)
	pos := be.rec.mark()
	be.create(t, be.ns, "owner-a", "late", 1)
	be.rec.waitAfter(t, pos, "A's add", isEvent(watchregistry.EventAdded, "late-0"))
	if st := r.State(refA); st != watchregistry.StateSynced {
		t.Fatalf("cluster a: %s, want Synced", st)
	}
	if budget.Used() != 3 {
		t.Fatalf("budget used %d, want 3: A's objects", budget.Used())
	}
	if n := be.rec.count(stateChanges(refA)); n != 0 {
		t.Fatalf("owner of cluster a told %d times", n)
	}
	checkInvariants(t, r)
}

func TestEveryWayAnInformerStopsRefundsTheBudget(t *testing.T) {
	be := newBudgetEnv(t)
	// The squatter's object is cached as a rejected stub, which counts.
	be.create(t, be.ns, "owner", "cm", 3)
	be.create(t, be.ns, "squatter", "foreign", 1)
	shard := be.sel + ",owner=owner"
	budget := watchregistry.NewBudget(100)
	r := be.registry(t, watchregistry.Options[string]{Keep: keepOwned, Linger: time.Minute})
	r.SetCluster("tenant", be.c.dyn, be.c.md, watchregistry.WithBudget(budget))
	stop := run(t, r)
	narrow := watchregistry.Ref{Cluster: "tenant", GVR: configMaps, Namespace: be.ns}
	wide := watchregistry.Ref{Cluster: "tenant", GVR: configMaps}
	synced := func(want int64, refs ...watchregistry.Ref) {
		t.Helper()
		track(t, r, "owner", refs...)
		for _, ref := range refs {
			waitState(t, r, ref, watchregistry.StateSynced)
		}
		if want >= 0 {
			waitUsed(t, budget, want)
		}
	}

	synced(4, narrow)
	r.SetCluster("tenant", be.c.dyn, be.c.md, watchregistry.WithBudget(budget))
	waitUsed(t, budget, 0)

	synced(4, narrow)
	r.RemoveCluster("tenant")
	waitUsed(t, budget, 0)
	r.SetCluster("tenant", be.c.dyn, be.c.md, watchregistry.WithBudget(budget))

	// Forget, then the linger passes.
	synced(4, narrow)
	r.Forget("owner")
	be.clk.Step(time.Minute)
	waitUsed(t, budget, 0)

	// An all-namespaces informer takes the namespaced one's ref over: its
	// cache alone is charged once the namespaced one has stopped.
	synced(4, narrow)
	synced(-1, narrow, wide)
	waitRunning(t, r, 1)
	waitUsed(t, budget, 4)

	// A prepared selector's cache is charged, and refunded once dropped.
	if err := r.Prepare(shard); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, budget, 7)
	if err := r.Prepare(); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, budget, 4)

	// Shutting the registry down.
	stop()
	waitUsed(t, budget, 0)
}

// TestWaitForSyncReturnsOverBudgetWithinTheHold: with RetryFailed, a ref
// whose cluster is held, stopped by the trip or tracked during the hold,
// makes WaitForSync return the error at once rather than wait for a hold
// of up to RetryMaxDelay; once the hold has passed, it waits through the
// retry.
func TestWaitForSyncReturnsOverBudgetWithinTheHold(t *testing.T) {
	be := newBudgetEnv(t)
	be.create(t, be.ns, "owner", "cm", 5)
	budget := watchregistry.NewBudget(3)
	r := be.registry(t, watchregistry.Options[string]{RetryFailed: true})
	r.SetCluster("tenant", be.c.dyn, be.c.md, watchregistry.WithBudget(budget))
	run(t, r)
	cms := watchregistry.Ref{Cluster: "tenant", GVR: configMaps, Namespace: be.ns}
	secs := watchregistry.Ref{Cluster: "tenant", GVR: secrets, Namespace: be.ns}
	track(t, r, "owner", cms)
	waitOverBudget(t, r, 1)
	track(t, r, "owner", cms, secs)

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for _, ref := range []watchregistry.Ref{cms, secs} {
		err := r.WaitForSync(ctx, ref)
		if !errors.Is(err, watchregistry.ErrOverBudget) || ctx.Err() != nil {
			t.Fatalf("WaitForSync of %s within the hold: %v, want ErrOverBudget at once", ref, err)
		}
	}

	// Cleaned up under the budget, the cluster lists again after the hold,
	// by itself, and WaitForSync waits for it.
	for i := range 3 {
		if err := be.c.cs.CoreV1().ConfigMaps(be.ns).Delete(ctx, fmt.Sprintf("cm-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	be.clk.Step(30 * time.Second)
	for _, ref := range []watchregistry.Ref{cms, secs} {
		if err := r.WaitForSync(ctx, ref); err != nil {
			t.Fatalf("WaitForSync of %s after the hold: %v", ref, err)
		}
	}
	waitUsed(t, budget, 2)
	checkInvariants(t, r)
}

// TestAnOverBudgetTripRacingAClusterChangeStillHoldsIt replaces or removes
// a cluster's clients between a charge over its budget and the handling of
// that trip: the change stops the informers, and the cluster is held all
// the same, so that new clients under its name list nothing before the
// hold ends.
func TestAnOverBudgetTripRacingAClusterChangeStillHoldsIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		removed bool
	}{
		{"replaced", false},
		{"removed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := newBudgetEnv(t)
			be.create(t, be.ns, "owner", "cm", 5)
			budget := watchregistry.NewBudget(3)
			r := be.registry(t, watchregistry.Options[string]{})
			r.SetCluster("tenant", be.c.dyn, be.c.md, watchregistry.WithBudget(budget))
			var changed atomic.Bool
			watchregistry.OnOverBudget(r, func(cluster string) {
				if cluster != "tenant" || !changed.CompareAndSwap(false, true) {
					return
				}
				if tc.removed {
					r.RemoveCluster("tenant")
				} else {
					r.SetCluster("tenant", be.c.dyn, be.c.md, watchregistry.WithBudget(budget))
				}
			})
			run(t, r)
			cms := watchregistry.Ref{Cluster: "tenant", GVR: configMaps, Namespace: be.ns}
			track(t, r, "owner", cms)

			err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
				until, _ := r.Held("tenant")
				return !until.IsZero(), nil
			})
			if err != nil {
				t.Fatalf("cluster not held after a trip that raced its change: %v", err)
			}
			until, berr := r.Held("tenant")
			if hold := until.Sub(be.clk.Now()); hold != 30*time.Second || berr == nil || berr.Cluster != "tenant" || berr.Max != 3 {
				t.Fatalf("hold: %s, %v; want 30s with the budget's error", hold, berr)
			}
			if tc.removed {
				r.SetCluster("tenant", be.c.dyn, be.c.md, watchregistry.WithBudget(budget))
			}
			started := r.Stats().Started
			track(t, r, "owner", cms)
			if st := r.State(cms); st != watchregistry.StateOverBudget {
				t.Fatalf("ref tracked again within the hold: %s, want OverBudget", st)
			}
			if got := r.Stats().Started; got != started {
				t.Fatalf("%d informers started within the hold", got-started)
			}
			waitUsed(t, budget, 0)
			checkInvariants(t, r)
		})
	}
}

// TestDeletesOfObjectsNeverCachedDoNotLowerTheCount has a hostile watch
// send deletes of names the cache never held, which client-go hands to the
// handler all the same: with a budget, whose account knows what the cache
// holds, the count is unchanged; without one, it never goes below zero.
func TestDeletesOfObjectsNeverCachedDoNotLowerTheCount(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget bool
	}{
		{"without a budget", false},
		{"with a budget", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin := newClients(t, controlPlane(t))
			ns := newNamespace(t, admin.cs)
			mine := createConfigMap(t, admin.cs, configMap(ns, "mine", "owner", nil))
			hostile := &injector{path: "/api/v1/namespaces/" + ns + "/configmaps"}
			c := newClients(t, hostile.wrap(controlPlane(t)))
			rec := &recorder{}
			r := newRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue})
			budget := watchregistry.NewBudget(100)
			if tc.budget {
				r.SetCluster("", c.dyn, c.md, watchregistry.WithBudget(budget))
			}
			run(t, r)
			ref := watchregistry.Ref{GVR: configMaps, Namespace: ns}
			track(t, r, "owner", ref)
			waitState(t, r, ref, watchregistry.StateSynced)
			err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
				return hostile.watching(), nil
			})
			if err != nil {
				t.Fatalf("no watch opened: %v", err)
			}
			if n := r.Stats().CachedObjects; n != 1 {
				t.Fatalf("cached objects: %d, want 1", n)
			}

			// Twice as many deletes of unknown names as objects cached.
			for _, name := range []string{"ghost-0", "ghost-1"} {
				ghost := map[string]any{"type": "DELETED", "object": map[string]any{
					"apiVersion": "v1", "kind": "ConfigMap",
					"metadata": map[string]any{
						"namespace": ns, "name": name, "uid": "ghost-" + name, "resourceVersion": mine.ResourceVersion,
						"labels": map[string]any{managedBy: "watchregistry-test", ownerLabel: "owner"},
					},
				}}
				if hostile.inject(t, ghost) == 0 {
					t.Fatal("the watch closed before the deletes could be sent")
				}
			}
			// Events of one watch are handled in order.
			rec.waitAfter(t, 0, "the second delete", isEvent(watchregistry.EventDeleted, "ghost-1"))
			if n := r.Stats().CachedObjects; n < 0 || (tc.budget && n != 1) {
				t.Fatalf("cached objects after deletes of names never cached: %d, want 1 with a budget, never below 0", n)
			}
			if tc.budget && budget.Used() != 1 {
				t.Fatalf("budget used: %d, want 1", budget.Used())
			}

			// A delete of an object cached still counts.
			if err := admin.cs.CoreV1().ConfigMaps(ns).Delete(context.Background(), "mine", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			rec.waitAfter(t, 0, "the real delete", isEvent(watchregistry.EventDeleted, "mine"))
			if n := r.Stats().CachedObjects; n != 0 {
				t.Fatalf("cached objects once the one cached was deleted: %d, want 0", n)
			}
		})
	}
}

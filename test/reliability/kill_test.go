// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package reliability_test

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// killResources is how many resources converge under SIGKILLs: 800 objects.
const killResources = 200

// TestSIGKILLDuringConvergeLeavesNoOrphansOrDuplicateApplies kills the
// operator with SIGKILL at random moments while 200 resources converge and
// restarts it each time. In the end every resource converges; every object
// that carries an owner-uid label is listed in the inventory of the live
// resource it names (no orphans); a restart of the converged operator
// re-applies nothing that is in sync; and deleting the resources still
// removes every managed object.
func TestSIGKILLDuringConvergeLeavesNoOrphansOrDuplicateApplies(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	seed := time.Now().UnixNano()
	if s := os.Getenv("VIDRA_RELIABILITY_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("VIDRA_RELIABILITY_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (VIDRA_RELIABILITY_SEED=%d replays these kill moments)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))

	ns := namespace(t)
	op := startOperator(t, ns)
	start := time.Now()
	createResources(t, ns, killResources)

	kills := 3 + rng.IntN(3)
	appliesBeforeKills := 0.0
	for k := range kills {
		// A moment between 0.1 s and 1.2 s after the process became ready:
		// while it adds finalizers, applies or writes status. The whole set
		// converges in a few seconds, so later moments would miss it.
		delay := 100*time.Millisecond + time.Duration(rng.Int64N(int64(1100*time.Millisecond)))
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		applies := op.metric(ctx, "vidra_applies_total", nil)
		ready, _ := converged(ctx, ns)
		op.Kill()
		appliesBeforeKills += applies
		t.Logf("kill %d/%d: SIGKILL pid %d %s after it was ready; %d/%d resources converged; about %.0f applies by it",
			k+1, kills, op.PID(), delay.Round(time.Millisecond), ready, killResources, applies)
		op = startOperator(t, ns)
	}
	took := waitConverged(t, ns, killResources, 4*time.Minute)
	t.Logf("all %d resources converged %s after the last restart, %s after they were created; applies: about %.0f by the killed processes, %.0f by the last",
		killResources, took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), appliesBeforeKills, op.metric(ctx, "vidra_applies_total", nil))

	assertNoOrphans(t, ns)

	// The final restart: the converged objects are in sync, so the new
	// process reconciles every resource at start-up and writes nothing.
	// The count of start-up reconciles is no barrier: a resource is woken
	// at start-up both by the VidraResource informer's first list and by
	// its objects' informers' first lists, and may be counted twice while
	// another has not been looked at yet. A resource looked at tells the
	// watch registry what it watches, so the registry's owners count the
	// resources looked at, each once; then the queue going idle says that
	// every reconcile queued has finished, its applies counted with it.
	op.Kill()
	op = startOperator(t, ns)
	var owners float64
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		owners = op.metric(ctx, "vidra_watchregistry_owners", nil)
		return owners == killResources, nil
	})
	if err != nil {
		t.Fatalf("the restarted operator looked at %.0f of the %d resources: %v", owners, killResources, err)
	}
	waitQuiet(t, 4*killResources, true, op)
	m, err := op.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	applies := m.Sum("vidra_applies_total", nil)
	byTrigger := map[string]float64{}
	for _, s := range m["vidra_reconciles_total"] {
		byTrigger[s.Labels["trigger"]+"/"+s.Labels["result"]] += s.Value
	}
	t.Logf("restart of the converged operator: reconciles %v, %.0f applies (of %d objects)", byTrigger, applies, 4*killResources)
	// An object in sync needs no apply at all.
	if applies != 0 {
		t.Errorf("the restarted operator applied %.0f objects; everything was in sync, so a restart writes nothing", applies)
	}
	if ready, _ := converged(ctx, ns); ready != killResources {
		t.Errorf("after the final restart %d of %d resources are converged", ready, killResources)
	}

	// Deletion still cleans up, through the finalizer of each resource.
	deleted := time.Now()
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	var left int
	var objs []managedObject
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := vidra.InfrahubV1alpha1().VidraResources(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		if objs, err = listManaged(ctx, ns); err != nil {
			return false, nil
		}
		left = len(list.Items)
		return left == 0 && len(objs) == 0, nil
	})
	if err != nil {
		t.Fatalf("after deleting every resource, %d resources and %d managed objects remain: %v", left, len(objs), err)
	}
	t.Logf("deletion of %d resources and %d objects finished in %s", killResources, 4*killResources, time.Since(deleted).Round(time.Millisecond))
}

// assertNoOrphans compares the objects carrying an owner-uid label with the
// union of the inventories: each must be listed by the resource whose UID it
// carries, and each inventory entry must exist.
func assertNoOrphans(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	list, err := vidra.InfrahubV1alpha1().VidraResources(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ kind, namespace, name string }
	listedBy := map[key]string{}
	for _, vr := range list.Items {
		for _, m := range vr.Status.ManagedResources {
			k := key{m.Kind, m.Namespace, m.Name}
			if other, dup := listedBy[k]; dup {
				t.Errorf("%v is in the inventories of two resources (UIDs %s and %s)", k, other, vr.UID)
			}
			listedBy[k] = string(vr.UID)
		}
	}
	objs, err := listManaged(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	found := map[key]bool{}
	orphans := 0
	for _, o := range objs {
		k := key{o.kind, o.namespace, o.name}
		found[k] = true
		if uid, ok := listedBy[k]; !ok || uid != o.ownerUID {
			orphans++
			t.Errorf("orphan: %s %s/%s carries owner UID %s, but no inventory of that resource lists it", o.kind, o.namespace, o.name, o.ownerUID)
		}
	}
	for k := range listedBy {
		if !found[k] {
			t.Errorf("inventory lists %v, which does not exist", k)
		}
	}
	t.Logf("orphan check: %d labelled objects, %d inventory entries, %d orphans", len(objs), len(listedBy), orphans)
}

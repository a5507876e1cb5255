// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package reliability_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/shard"
)

const (
	shardResources = 60
	shardLease     = 4 * time.Second
)

// startMember starts a replica of a sharded operator named id.
func startMember(t *testing.T, ns, id string) *operator {
	t.Helper()
	return startOperator(t, ns, "--sharding", "--shard-identity="+id,
		"--shard-lease-duration="+shardLease.String(), "--shard-renew-period=500ms")
}

// waitMembers waits until each replica has settled on a view of n members.
func waitMembers(t *testing.T, n int, ops ...*operator) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, op := range ops {
			if op.metric(ctx, "vidra_shard_members", nil) != float64(n) || op.metric(ctx, "vidra_shard_buckets", nil) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the replicas never settled on %d members", n)
	}
}

// waitCached waits until the replicas cache want objects between them.
func waitCached(t *testing.T, want int, ops ...*operator) {
	t.Helper()
	waitQuiet(t, want, false, ops...)
}

// waitQuiet waits until the replicas cache want objects between them and,
// with idle, until none has work queued or under way: every add to a
// replica's queue is processed once (an add while the key is processed
// included), so a queue whose adds equal its finished items, with nothing
// queued, has nothing left. Metrics are gathered one by one, so the adds
// must also read the same in two scrapes in a row. Once their informers
// hold every object, the events that could wake a reconcile have been
// delivered. What this cannot see is a key put off for later (AddAfter: a
// retry's backoff, a paced health wake), which joins the queue only when
// due; a converged resource has none but its interval.
func waitQuiet(t *testing.T, want int, idle bool, ops ...*operator) {
	t.Helper()
	var cached float64
	busy := ""
	last := make([]float64, len(ops))
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cached, busy = 0, ""
		for i, op := range ops {
			m, err := op.Metrics(ctx)
			if err != nil {
				return false, nil
			}
			cached += m.Sum("vidra_watchregistry_cached_objects", nil)
			adds, done := m.Sum("workqueue_adds_total", nil), m.Sum("workqueue_work_duration_seconds_count", nil)
			if idle && (adds != done || adds != last[i] || m.Sum("workqueue_depth", nil) != 0) {
				busy = fmt.Sprintf("replica %d has %.0f of %.0f queued keys unfinished", i, adds-done, adds)
			}
			last[i] = adds
		}
		return cached == float64(want) && busy == "", nil
	})
	if err != nil {
		t.Fatalf("the replicas cache %.0f objects between them, want each of the %d once; %s", cached, want, busy)
	}
}

// Three replicas split the resources, each applying and caching only its
// share; when one is SIGKILLed, the others take its buckets over and serve
// its resources again, and nothing is applied twice or lost.
func TestShardedReplicasSplitTheWorkAndTakeOverFromAKilledOne(t *testing.T) {
	ns := namespace(t)
	ids := []string{"member-a", "member-b", "member-c"}
	ops := make([]*operator, len(ids))
	for i, id := range ids {
		ops[i] = startMember(t, ns, id)
	}
	waitMembers(t, 3, ops...)

	createResources(t, ns, shardResources)
	waitConverged(t, ns, shardResources, 3*time.Minute)
	waitQuiet(t, 4*shardResources, true, ops...)
	ctx := t.Context()
	var applies, cached, keys float64
	for i, op := range ops {
		a := op.metric(ctx, "vidra_applies_total", map[string]string{"result": "success"})
		c := op.metric(ctx, "vidra_watchregistry_cached_objects", nil)
		k := op.metric(ctx, "vidra_shard_keys", nil)
		t.Logf("%s: %.0f keys, %.0f applies, %.0f objects cached", ids[i], k, a, c)
		if k == 0 || c == 0 {
			t.Errorf("%s has no share: %.0f keys, %.0f objects cached", ids[i], k, c)
		}
		applies, cached, keys = applies+a, cached+c, keys+k
	}
	if keys != shardResources {
		t.Errorf("the replicas own %.0f resources between them, want %d: each exactly once", keys, shardResources)
	}
	if applies != 4*shardResources {
		t.Errorf("%.0f successful applies for %d objects: an object was applied by two replicas, or twice", applies, 4*shardResources)
	}
	if cached != 4*shardResources {
		t.Errorf("the replicas cache %.0f objects between them, want each of the %d once", cached, 4*shardResources)
	}

	// Kill member-b and break an object of one of its resources at once.
	victim := -1
	for i := range shardResources {
		b := shard.Bucket(cache.ObjectName{Namespace: ns, Name: resourceName(i)})
		if shard.Owner(b, ids) == "member-b" {
			victim = i
			break
		}
	}
	if victim < 0 {
		t.Fatal("member-b owns none of the resources")
	}
	// reconciles counts an operator's reconciles but its retries, which
	// re-run failed ones and verify nothing.
	reconciles := func(op *operator) float64 {
		return op.metric(ctx, "vidra_reconciles_total", nil) - op.metric(ctx, "vidra_reconciles_total", map[string]string{"trigger": "retry"})
	}
	// takeovers counts the reconciles a takeover wakes: each resource
	// gained is queued as rebalance, and woken again, as startup (which
	// outranks it), by the first list of the informer that selects the
	// buckets gained. Nothing else wakes the survivors with either: they
	// keep their informers through a handoff in which they only gain.
	takeovers := func(op *operator) float64 {
		return op.metric(ctx, "vidra_reconciles_total", map[string]string{"trigger": "rebalance"}) +
			op.metric(ctx, "vidra_reconciles_total", map[string]string{"trigger": "startup"})
	}
	// The survivor the victim's bucket goes to once member-b is gone.
	heir := slices.Index(ids, shard.Owner(shard.Bucket(cache.ObjectName{Namespace: ns, Name: resourceName(victim)}), []string{ids[0], ids[2]}))
	preparedBefore := make([]float64, len(ops))
	keysBefore := make([]float64, len(ops))
	reconcilesBefore := make([]float64, len(ops))
	takeoversBefore := make([]float64, len(ops))
	for i, op := range ops {
		preparedBefore[i] = op.metric(ctx, "vidra_shard_prepared_total", nil)
		keysBefore[i] = op.metric(ctx, "vidra_shard_keys", nil)
		reconcilesBefore[i] = reconciles(op)
		takeoversBefore[i] = takeovers(op)
	}
	ops[1].Kill()
	killed := time.Now()
	deleteConfigMap(t, ns, resourceName(victim))
	// The deadline only catches a handoff that never happens: how soon it
	// comes depends on the load of the machine, and is logged.
	waitRestored(t, fmt.Sprintf("the ConfigMap of %s, whose replica was killed", resourceName(victim)), shardLease+30*time.Second,
		configMapExists(ns, resourceName(victim)))
	t.Logf("a resource of the killed replica was served again %s after the kill (Lease duration %s)", time.Since(killed).Round(time.Millisecond), shardLease)
	// What repaired it is the heir taking member-b's buckets over: until
	// then the resource is not the heir's, and whatever the heir saw of the
	// ConfigMap waits for the takeover. A reconcile counts once it is
	// over, after the repair it made.
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return takeovers(ops[heir]) > takeoversBefore[heir], nil
	})
	if err != nil {
		t.Errorf("%s, the heir of %s's bucket, reconciled nothing it took over from the killed replica (vidra_reconciles_total of triggers rebalance and startup: %.0f, as before the kill)",
			ids[heir], resourceName(victim), takeoversBefore[heir])
	}
	waitMembers(t, 2, ops[0], ops[2])
	// The survivors added the killed replica's buckets to their caches
	// (listing only those): every object cached once between them.
	waitCached(t, 4*shardResources, ops[0], ops[2])
	// They listed those buckets ahead, once member-b had missed a renewal,
	// while its Lease ran.
	for _, i := range []int{0, 2} {
		if got := ops[i].metric(ctx, "vidra_shard_prepared_total", nil); got <= preparedBefore[i] {
			t.Errorf("%s did not list ahead the buckets it took over from the killed replica (vidra_shard_prepared_total %.0f, %.0f before)", ids[i], got, preparedBefore[i])
		}
	}
	assertNoOrphans(t, ns)
	if n, err := converged(ctx, ns); err != nil || n != shardResources {
		t.Errorf("%d of %d resources converged after the handoff (%v)", n, shardResources, err)
	}
	// Their informers kept running: they reconciled the resources they
	// took over, not again the ones they kept, whose objects they watched
	// throughout. Retries are not counted, and a few more reconciles are
	// allowed: a gained resource woken both by the rebalance and by its
	// informer's first list, the repaired one's.
	judged := 0
	waitQuiet(t, 4*shardResources, true, ops[0], ops[2])
	for _, i := range []int{0, 2} {
		gained := ops[i].metric(ctx, "vidra_shard_keys", nil) - keysBefore[i]
		since := reconciles(ops[i]) - reconcilesBefore[i]
		took := takeovers(ops[i]) - takeoversBefore[i]
		t.Logf("%s: %.0f resources gained, %.0f kept, %.0f reconciles since the kill, %.0f of them woken by the takeover", ids[i], gained, keysBefore[i], since, took)
		if took < gained {
			t.Errorf("%s reconciled %.0f resources for the takeover, for %.0f resources gained: each gained one should be", ids[i], took, gained)
		}
		if keysBefore[i] < 8 {
			// Too few to tell from the slack (the namespace's random name
			// decides the buckets); the other survivor keeps the rest.
			continue
		}
		judged++
		if since > gained+3 {
			t.Errorf("%s reconciled %.0f times after the handoff, for %.0f resources gained: it verified again resources it kept", ids[i], since, gained)
		}
	}
	if judged == 0 {
		t.Errorf("neither survivor kept 8 resources of %d: the handoff's reconciles were not judged", shardResources)
	}

	// A replica that joins takes its share without a restart of the others.
	d := startMember(t, ns, "member-d")
	waitMembers(t, 3, ops[0], ops[2], d)
	waitCached(t, 4*shardResources, ops[0], ops[2], d)
	list, err := vidra.InfrahubV1alpha1().VidraResources(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != shardResources {
		t.Fatalf("%d resources, want %d", len(list.Items), shardResources)
	}
}

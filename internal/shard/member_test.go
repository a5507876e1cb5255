// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const (
	testLease = time.Second
	testRenew = 100 * time.Millisecond
)

// running is a member run by a test.
type running struct {
	*Member
	stop func()
}

func start(t *testing.T, client kubernetes.Interface, id string) *running {
	t.Helper()
	return startWith(t, Options{Client: client, Identity: id})
}

// startWith runs a member of opts, in the test's namespace and with its
// Lease timings.
func startWith(t *testing.T, opts Options, listeners ...Listener) *running {
	t.Helper()
	opts.Namespace, opts.LeaseDuration, opts.RenewPeriod = "vidra-system", testLease, testRenew
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range listeners {
		m.Listen(l)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := m.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	var once sync.Once
	r := &running{Member: m, stop: func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}}
	t.Cleanup(r.stop)
	return r
}

// waitSettled waits until every member has settled on a view of exactly
// them.
func waitSettled(t *testing.T, ms ...*running) {
	t.Helper()
	var want []string
	for _, m := range ms {
		want = append(want, m.Identity())
	}
	slices.Sort(want)
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*testLease, true, func(context.Context) (bool, error) {
		for _, m := range ms {
			view, settled := m.View()
			if !settled || !slices.Equal(view, want) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		var views []string
		for _, m := range ms {
			v, s := m.View()
			views = append(views, fmt.Sprintf("%s: %v settled=%v", m.Identity(), v, s))
		}
		t.Fatalf("members never settled on %v: %v", want, views)
	}
}

// assertPartition checks that the members own every key of keys once.
func assertPartition(t *testing.T, keys []cache.ObjectName, ms ...*running) {
	t.Helper()
	for _, k := range keys {
		n := 0
		for _, m := range ms {
			if m.Owns(k) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%v is owned by %d members", k, n)
		}
	}
}

func testKeys(n int) []cache.ObjectName {
	keys := make([]cache.ObjectName, n)
	for i := range keys {
		keys[i] = cache.ObjectName{Namespace: fmt.Sprintf("ns-%d", i%7), Name: fmt.Sprintf("app-%d", i)}
	}
	return keys
}

// A join, a graceful leave and a death: never two members inside one key
// at once, and every key owned once whenever the view is settled.
func TestMembersNeverReconcileOneKeyTogether(t *testing.T) {
	client := fake.NewClientset()
	keys := testKeys(64)
	inside := make([]atomic.Int32, len(keys))
	var violations, entered atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var workers sync.WaitGroup
	work := func(m *running) {
		workers.Go(func() {
			for i := 0; ctx.Err() == nil; i = (i + 1) % len(keys) {
				_, leave, ok := m.Enter(ctx, keys[i])
				if !ok {
					continue
				}
				if inside[i].Add(1) != 1 {
					violations.Add(1)
				}
				entered.Add(1)
				time.Sleep(200 * time.Microsecond)
				inside[i].Add(-1)
				leave()
			}
		})
	}
	defer func() {
		cancel()
		workers.Wait()
		if v := violations.Load(); v > 0 {
			t.Errorf("%d times two members reconciled one key at once", v)
		}
	}()

	a := start(t, client, "a")
	work(a)
	waitSettled(t, a)
	assertPartition(t, keys, a)

	b := start(t, client, "b")
	work(b)
	c := start(t, client, "c")
	work(c)
	waitSettled(t, a, b, c)
	assertPartition(t, keys, a, b, c)

	// A graceful leave deletes the member's Lease, so that the others hand
	// over at once rather than when it expires.
	b.stop()
	if _, err := client.CoordinationV1().Leases("vidra-system").Get(context.Background(), leaseName("b"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("b left and its Lease is still there (%v)", err)
	}
	waitSettled(t, a, c)
	assertPartition(t, keys, a, c)

	// A member that stops renewing (dies) holds everyone back until its
	// Lease expires, then loses its buckets.
	ghost := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName("ghost"), Namespace: "vidra-system", Labels: map[string]string{MemberLabel: "true"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("ghost"), LeaseDurationSeconds: ptr.To(int32(1)),
			RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))},
	}
	if _, err := client.CoordinationV1().Leases("vidra-system").Create(context.Background(), ghost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expires := ghost.Spec.RenewTime.Add(testLease)
	// First the ghost joins the view, which cannot settle without it...
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*testLease, true, func(context.Context) (bool, error) {
		for _, m := range []*running{a, c} {
			if view, _ := m.View(); !slices.Contains(view, "ghost") {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal("the ghost's Lease never joined the view")
	}
	// ...then it expires, and the view settles without it: not before.
	waitSettled(t, a, c)
	if now := time.Now(); now.Before(expires) {
		t.Errorf("the view settled without the ghost %s before its Lease expired", expires.Sub(now))
	}
	assertPartition(t, keys, a, c)
	if entered.Load() == 0 {
		t.Fatal("no member ever entered a key")
	}
}

// leaseOutage makes the fake API server refuse every Lease request once
// refuse is set, and counts the requests it refused.
type leaseOutage struct {
	refuse  atomic.Bool
	refused atomic.Int64
}

// refusingLeases returns a fake client whose Lease requests fail once the
// outage's refuse is set. The reactor is in place before any member runs:
// the fake's reactor chain may not change while requests go through it.
func refusingLeases() (*fake.Clientset, *leaseOutage) {
	client := fake.NewClientset()
	out := &leaseOutage{}
	client.PrependReactor("*", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if out.refuse.Load() {
			out.refused.Add(1)
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	return client, out
}

// step moves clk a renew period on and waits for the n-th refused request:
// the member's attempt to renew on that tick. A member sends nothing else
// while its Lease is refused, so the attempt proves that the tick reached
// it and that it is done with the ticks before. The next tick is sent only
// then: the fake's ticker drops a tick its reader has not taken yet.
func (o *leaseOutage) step(t *testing.T, clk *stepClock, n int64) {
	t.Helper()
	clk.Step(testRenew)
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return o.refused.Load() >= n, nil
	})
	if err != nil {
		t.Fatalf("tick %d: the member never tried to renew (%d requests refused)", n, o.refused.Load())
	}
}

// stepClock is a fake clock whose timers drop, when reset, a time they
// fired that nobody read, as Go's timers do since Go 1.23. A member resets
// its expiry timer without draining it. The fake's timer keeps the stale
// time instead, and when it fires again Step blocks on the full channel
// while holding the clock's lock, which the member needs to read the time:
// a deadlock.
type stepClock struct{ *clocktesting.FakeClock }

func newStepClock() *stepClock {
	return &stepClock{clocktesting.NewFakeClock(time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC))}
}

func (c *stepClock) NewTimer(d time.Duration) clock.Timer {
	return drainingTimer{c.FakeClock.NewTimer(d)}
}

type drainingTimer struct{ clock.Timer }

func (t drainingTimer) Reset(d time.Duration) bool {
	active := t.Stop()
	select {
	case <-t.C():
	default:
	}
	t.Timer.Reset(d)
	return active
}

// A member that cannot renew its Lease stops reconciling once it could not
// for its renew deadline (the Lease duration less two renew periods), and
// not before: before its Lease expires, when the others may count it gone.
// The clock moves a renew period at a time, and never reaches the expiry.
func TestAMemberThatCannotRenewStopsReconciling(t *testing.T) {
	client, outage := refusingLeases()
	clk := newStepClock()
	a := startWith(t, Options{Client: client, Identity: "a", Clock: clk})
	waitSettled(t, a)
	key := cache.ObjectName{Namespace: "ns", Name: "app"}
	if !a.Owns(key) {
		t.Fatal("a lone member does not own every key")
	}
	// The API server stops answering its writes.
	outage.refuse.Store(true)
	deadline := testLease - 2*testRenew
	for n := int64(1); time.Duration(n)*testRenew < testLease; n++ {
		outage.step(t, clk, n)
		// The renewal under way now cannot pass the deadline, and every
		// earlier one has ended.
		if time.Duration(n)*testRenew <= deadline && !a.Owns(key) {
			t.Fatalf("a stopped reconciling at most %s after its last renewal, within its renew deadline of %s", time.Duration(n)*testRenew, deadline)
		}
	}
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return !a.Owns(key), nil
	})
	if err != nil {
		t.Fatalf("a member that could not renew its Lease for %s, past its renew deadline of %s, kept reconciling", testLease-testRenew, deadline)
	}
}

// A member that stops renewing is suspected after two renew periods: the
// others are told the buckets they would gain, before its Lease expires,
// and told nothing is left to prepare once it renews again or is gone.
// The clock moves a renew period at a time, and only once a has seen itself
// and b renew at the time it reads: b, which renews on every step, is then
// never late, however slowly its renewals reach a. Each check comes once a
// has looked at the Leases at the new time.
func TestMembersPrepareTheBucketsOfAMemberLateRenewing(t *testing.T) {
	client := fake.NewClientset()
	clk := newStepClock()
	aClock := &lookingClock{stepClock: clk}
	type call struct {
		change  bool
		buckets []int
	}
	var mu sync.Mutex
	var calls []call
	record := func(change bool) func(context.Context, []int) {
		return func(_ context.Context, buckets []int) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, call{change, slices.Clone(buckets)})
		}
	}
	a := startWith(t, Options{Client: client, Identity: "a", Clock: aClock}, funcListener{record(true), record(false)})
	b := startWith(t, Options{Client: client, Identity: "b", Clock: clk})
	waitSettled(t, a, b)
	// A view reads settled just before ShardChanged runs: wait until a has
	// taken its share of the two on, or that call would come after the
	// ghost's.
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) > 0 && fmt.Sprint(calls[len(calls)-1]) == fmt.Sprint(call{true, Owned("a", []string{"a", "b"})}), nil
	})
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("a never took its share of a and b on: calls %v", calls)
	}

	// A ghost joins, acknowledges the view of the three, and renews no
	// more.
	view := []string{"a", "b", "ghost"}
	leases := client.CoordinationV1().Leases("vidra-system")
	ghost := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leaseName("ghost"), Namespace: "vidra-system", Labels: map[string]string{MemberLabel: "true"},
			Annotations: map[string]string{ViewAnnotation: viewHash(view)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("ghost"), LeaseDurationSeconds: ptr.To(int32(testLease / time.Second)),
			RenewTime: ptr.To(metav1.NewMicroTime(clk.Now()))},
	}
	mu.Lock()
	calls = nil
	mu.Unlock()
	if _, err := leases.Create(context.Background(), ghost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var gain []int
	for _, bucket := range Owned("ghost", view) {
		if Owner(bucket, []string{"a", "b"}) == "a" {
			gain = append(gain, bucket)
		}
	}
	// checkCalls checks that the calls so far are want.
	checkCalls := func(what string, want ...call) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(calls) != fmt.Sprint(want) {
			t.Fatalf("%s: calls %v, want %v", what, calls, want)
		}
	}
	// waitCalls waits for as many calls as want, then checks them.
	waitCalls := func(what string, want ...call) {
		t.Helper()
		_ = wait.PollUntilContextTimeout(context.Background(), time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return len(calls) >= len(want), nil
		})
		checkCalls(what, want...)
	}
	// step moves the clock a renew period on once a has seen itself and b
	// renew at the time it reads, and returns once a has looked at the
	// Leases at the new time: whatever a does upon it is done.
	step := func() {
		t.Helper()
		for _, id := range []string{"a", "b"} {
			waitRenewalSeen(t, a, id, clk.Now())
		}
		clk.Step(testRenew)
		aClock.waitLooked(t, clk.Now())
	}
	share := func(members ...string) call { return call{true, Owned("a", members)} }
	// The ghost, seen renewing at the time the clock reads, is not late.
	waitCalls("the ghost joined", share(view...))
	step()
	checkCalls("the ghost a renew period late", share(view...))
	// The ghost is suspected before its Lease expires: only its buckets
	// are prepared, not the renewing b's.
	step()
	checkCalls("the ghost two renew periods late", share(view...), call{false, gain})
	// It renews once, by a clock far behind: a renewal all the same, seen
	// now. Nothing to prepare, and the view stays.
	ghost.Spec.RenewTime = ptr.To(metav1.NewMicroTime(ghost.Spec.RenewTime.Add(time.Millisecond)))
	if _, err := leases.Update(context.Background(), ghost, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCalls("the ghost renewed", share(view...), call{false, gain}, call{false, nil})
	// Then it dies: prepared again two renew periods on, and so until its
	// Lease expires, a Lease duration after the time it says.
	step()
	checkCalls("the ghost a renew period late again", share(view...), call{false, gain}, call{false, nil})
	expires := ghost.Spec.RenewTime.Add(testLease)
	for !clk.Now().Add(testRenew).After(expires) {
		step()
		checkCalls("the ghost late again", share(view...), call{false, gain}, call{false, nil}, call{false, gain})
	}
	// Then its buckets are taken over, and nothing is left to prepare.
	step()
	waitCalls("the ghost dead", share(view...), call{false, gain}, call{false, nil}, call{false, gain}, share("a", "b"), call{false, nil})
	waitSettled(t, a, b)
}

// lookingClock is a member's clock that tells when the member last looked
// at the Leases. The member reads the time, looks and resets its expiry
// timer, all on its own goroutine: a reset says it looked at the time it
// read first since the reset before, or later, for the clock only moves on.
type lookingClock struct {
	*stepClock
	mu           sync.Mutex
	read, looked time.Time
}

func (c *lookingClock) Now() time.Time {
	now := c.stepClock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read.IsZero() {
		c.read = now
	}
	return now
}

func (c *lookingClock) NewTimer(d time.Duration) clock.Timer {
	return lookingTimer{Timer: c.stepClock.NewTimer(d), clock: c}
}

type lookingTimer struct {
	clock.Timer
	clock *lookingClock
}

func (t lookingTimer) Reset(d time.Duration) bool {
	c := t.clock
	c.mu.Lock()
	c.looked, c.read = c.read, time.Time{}
	c.mu.Unlock()
	return t.Timer.Reset(d)
}

// waitLooked waits until the member has looked at the Leases at at or
// later.
func (c *lookingClock) waitLooked(t *testing.T, at time.Time) {
	t.Helper()
	var looked time.Time
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		looked = c.looked
		return !looked.Before(at), nil
	})
	if err != nil {
		t.Fatalf("the member never looked at the Leases at %s: it last looked at %s", at.Format(time.StampMilli), looked.Format(time.StampMilli))
	}
}

// Who counts as late: a member not seen renewing for two renew periods,
// from when its renewal was seen whatever time its Lease says, and no one
// while this member has not seen its own renewal for as long.
func TestLateMembers(t *testing.T) {
	m, err := New(Options{Client: fake.NewClientset(), Namespace: "vidra-system", Identity: "a", LeaseDuration: testLease, RenewPeriod: testRenew})
	if err != nil {
		t.Fatal(err)
	}
	view := []string{"a", "b", "c"}
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	behind := t0.Add(-time.Hour) // c's clock
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		name    string
		now     time.Time
		renewed map[string]time.Time
		want    []string
	}{
		{"all seen now", at(0), map[string]time.Time{"a": at(0), "b": at(0), "c": behind}, nil},
		{"one period on", at(testRenew), map[string]time.Time{"a": at(testRenew), "b": at(0), "c": behind}, nil},
		{"b missed a renewal; c's old time renewed", at(2 * testRenew), map[string]time.Time{"a": at(2 * testRenew), "b": at(0), "c": behind.Add(time.Millisecond)}, []string{"b"}},
		{"c missed one too", at(4 * testRenew), map[string]time.Time{"a": at(4 * testRenew), "b": at(0), "c": behind.Add(time.Millisecond)}, []string{"b", "c"}},
		{"b renewed", at(4*testRenew + time.Millisecond), map[string]time.Time{"a": at(4 * testRenew), "b": at(4 * testRenew), "c": behind.Add(time.Millisecond)}, []string{"c"}},
		{"a's own renewals unseen for two periods", at(6 * testRenew), map[string]time.Time{"a": at(4 * testRenew), "b": at(4 * testRenew), "c": behind.Add(time.Millisecond)}, nil},
	}
	for _, s := range steps {
		got, next := m.lateMembers(s.now, view, s.renewed)
		if !slices.Equal(got, s.want) {
			t.Fatalf("%s: late %v, want %v", s.name, got, s.want)
		}
		if next <= 0 || next > testLease {
			t.Fatalf("%s: look again in %s", s.name, next)
		}
	}
}

// A reconcile longer than the Lease, under way when the view changes: its
// member goes on renewing while it waits for it, so no other member counts
// it gone and enters its key before it has ended.
func TestAReconcileLongerThanTheLeaseIsNotOverlappedByAHandoff(t *testing.T) {
	client := fake.NewClientset()
	clk := newStepClock()
	member := func(id string) *running { return startWith(t, Options{Client: client, Identity: id, Clock: clk}) }
	a, b := member("a"), member("b")
	waitSettled(t, a, b)
	var key cache.ObjectName
	for _, k := range testKeys(64) {
		if a.Owns(k) {
			key = k
			break
		}
	}
	_, leave, ok := a.Enter(context.Background(), key)
	if !ok {
		t.Fatalf("a does not enter %v, a key it owns", key)
	}
	// a's member waits for this reconcile to leave: it must end before
	// the members stop, whatever fails.
	var left sync.Once
	t.Cleanup(func() { left.Do(leave) })
	c := member("c") // a change of view, while a's reconcile runs
	waitInView(t, c, "c")
	// The reconcile outlasts the Lease three times over: the others would
	// have counted a gone after one. Each check comes once b and c have
	// seen a renew at the time the clock reads: then nothing they did
	// meanwhile could have counted it gone.
	for range 3 * testLease / testRenew {
		clk.Step(testRenew)
		for _, m := range []*running{b, c} {
			waitRenewalSeen(t, m, "a", clk.Now())
		}
		for _, m := range []*running{b, c} {
			if _, l, ok := m.Enter(context.Background(), key); ok {
				l()
				t.Fatalf("%s entered %v while a was still reconciling it", m.Identity(), key)
			}
		}
		if view, _ := b.View(); !slices.Contains(view, "a") {
			t.Fatalf("b's view %v lost a while a waited for its reconcile", view)
		}
	}
	left.Do(leave)
	waitSettled(t, a, b, c)
	assertPartition(t, testKeys(64), a, b, c)
}

// waitInView waits until m's view holds id. m's first view comes from its
// cache of the Leases: m.lister, which Run sets, may be read from then on.
func waitInView(t *testing.T, m *running, id string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		view, _ := m.View()
		return slices.Contains(view, id), nil
	})
	if err != nil {
		view, _ := m.View()
		t.Fatalf("%s's view %v never held %s", m.Identity(), view, id)
	}
}

// waitRenewalSeen waits until m's cache of the Leases holds a renewal of id
// at at or later.
func waitRenewalSeen(t *testing.T, m *running, id string, at time.Time) {
	t.Helper()
	var renewed time.Time
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		l, err := m.lister.Leases("vidra-system").Get(leaseName(id))
		if err != nil || l.Spec.RenewTime == nil {
			return false, nil
		}
		renewed = l.Spec.RenewTime.Time
		return !renewed.Before(at), nil
	})
	if err != nil {
		t.Fatalf("%s never saw %s renew at %s: its last renewal seen is of %s", m.Identity(), id, at.Format(time.StampMilli), renewed.Format(time.StampMilli))
	}
}

// A member fenced for want of renewals cancels the reconciles under way:
// they must end before the others may count it gone.
func TestAFencedMemberCancelsItsReconciles(t *testing.T) {
	client, outage := refusingLeases()
	clk := newStepClock()
	a := startWith(t, Options{Client: client, Identity: "a", Clock: clk})
	waitSettled(t, a)
	key := cache.ObjectName{Namespace: "ns", Name: "app"}
	ctx, leave, ok := a.Enter(context.Background(), key)
	if !ok {
		t.Fatal("a lone member does not enter a key")
	}
	// Fenced, the member waits for this reconcile to leave: it must end
	// before the member stops, whatever fails.
	var left sync.Once
	t.Cleanup(func() { left.Do(leave) })
	outage.refuse.Store(true)
	deadline := testLease - 2*testRenew
	for n := int64(1); time.Duration(n)*testRenew < testLease; n++ {
		outage.step(t, clk, n)
		if time.Duration(n)*testRenew <= deadline && ctx.Err() != nil {
			t.Fatalf("the reconcile was cancelled at most %s after the last renewal, within the renew deadline of %s", time.Duration(n)*testRenew, deadline)
		}
	}
	select {
	case <-ctx.Done():
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatalf("the reconcile of a member that could not renew its Lease for %s, past its renew deadline of %s, was not cancelled", testLease-testRenew, deadline)
	}
	left.Do(leave)
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return !a.Owns(key), nil
	})
	if err != nil {
		t.Error("the fenced member still owns its keys")
	}
}

// funcListener is a Listener of two functions.
type funcListener struct{ changed, prepare func(context.Context, []int) }

func (l funcListener) ShardChanged(ctx context.Context, b []int) { l.changed(ctx, b) }
func (l funcListener) ShardPrepare(ctx context.Context, b []int) { l.prepare(ctx, b) }

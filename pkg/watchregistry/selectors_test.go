// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

func TestChangingTheLabelSelectorRestartsInformersInTheNewScope(t *testing.T) {
	_, ns, rec, r, ref := startOnShardOne(t)
	if _, err := r.Get(ref, ns, "b"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of an object outside the selector: %v, want NotFound", err)
	}

	if err := r.SetLabelSelector("shard in (("); err == nil {
		t.Fatal("an invalid selector was accepted")
	}
	pos := rec.mark()
	if err := r.SetLabelSelector(selector + ",shard in (2)"); err != nil {
		t.Fatal(err)
	}
	rec.waitAfter(t, pos, "EventStateChanged after the selector changed", isType(watchregistry.EventStateChanged, "owner-a"))
	track(t, r, "owner-a", ref)
	waitState(t, r, ref, watchregistry.StateSynced)
	if _, err := r.Get(ref, ns, "b"); err != nil {
		t.Fatalf("Get of an object the new selector selects: %v", err)
	}
	if _, err := r.Get(ref, ns, "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of an object the new selector leaves out: %v, want NotFound", err)
	}
	// The same selector again restarts nothing.
	pos = rec.mark()
	if err := r.SetLabelSelector(selector + ",shard in (2)"); err != nil {
		t.Fatal(err)
	}
	if st := r.State(ref); st != watchregistry.StateSynced {
		t.Fatalf("state after setting the same selector: %s", st)
	}
	_ = pos
}

func TestAddingALabelSelectorListsOnlyTheAddedScope(t *testing.T) {
	c, ns, rec, r, ref := startOnShardOne(t)
	started := r.Stats().Started
	one, two := selector+",shard in (1)", selector+",shard in (2)"

	pos := rec.mark()
	if err := r.SetLabelSelectors(one, two); err != nil {
		t.Fatal(err)
	}
	// Pending until the added informer has listed: the cache lacks b.
	if _, err := r.Get(ref, ns, "b"); err != nil && !errors.Is(err, watchregistry.ErrNotSynced) {
		t.Fatalf("Get while the added informer lists: %v, want ErrNotSynced or b", err)
	}
	// The owner of the object listed, and the ref's tracker, are woken as
	// after a first list; the tracker is not told to track again.
	rec.waitAfter(t, pos, "owner-b woken by the added list", isType(watchregistry.EventInitialList, "owner-b"))
	rec.waitAfter(t, pos, "owner-a woken once widened", isType(watchregistry.EventInitialList, "owner-a"))
	if n := len(filterRecords(rec.since(pos), isType(watchregistry.EventStateChanged, "owner-a"))); n != 0 {
		t.Fatalf("widening told the tracker to track again %d times:\n%s", n, rec.dump(pos))
	}
	waitState(t, r, ref, watchregistry.StateSynced)
	for _, name := range []string{"a", "b"} {
		if _, err := r.Get(ref, ns, name); err != nil {
			t.Fatalf("Get %s after widening: %v", name, err)
		}
	}
	if _, err := r.Get(ref, ns, "c"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of an object no selector selects: %v, want NotFound", err)
	}
	if s := r.Stats(); s.Started != started+1 || s.Running != 2 || s.CachedObjects != 2 {
		t.Fatalf("after widening: started %d (want %d, the first informer kept), running %d (want 2), cached %d (want 2)",
			s.Started, started+1, s.Running, s.CachedObjects)
	}
	// Both informers deliver events.
	pos = rec.mark()
	patchConfigMap(t, c.cs, ns, "a", `{"data":{"k":"1"}}`)
	patchConfigMap(t, c.cs, ns, "b", `{"data":{"k":"1"}}`)
	rec.waitAfter(t, pos, "a's update", isEvent(watchregistry.EventUpdated, "a"))
	rec.waitAfter(t, pos, "b's update", isEvent(watchregistry.EventUpdated, "b"))

	// An overlapping selector lists an object once more, but List returns
	// it once.
	if err := r.SetLabelSelectors(one, two, selector+",shard in (2,3)"); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitForSync(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	got, err := r.List(ref, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range got {
		names = append(names, u.GetName())
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Fatalf("List over overlapping selectors: %v, want [a b c]", names)
	}

	// Dropping a selector restarts every informer in the new scope.
	pos = rec.mark()
	if err := r.SetLabelSelectors(two); err != nil {
		t.Fatal(err)
	}
	rec.waitAfter(t, pos, "EventStateChanged after a selector was dropped", isType(watchregistry.EventStateChanged, "owner-a"))
	track(t, r, "owner-a", ref)
	waitState(t, r, ref, watchregistry.StateSynced)
	if _, err := r.Get(ref, ns, "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of an object of the dropped selector: %v, want NotFound", err)
	}
	waitRunning(t, r, 1)
	if err := r.SetLabelSelectors(); err == nil {
		t.Fatal("no selector at all was accepted")
	}
	if err := watchregistry.CheckInvariants(r); err != nil {
		t.Fatal(err)
	}
}

// filterRecords returns the records that match pred.
func filterRecords(recs []record, pred func(record) bool) []record {
	var out []record
	for _, rec := range recs {
		if pred(rec) {
			out = append(out, rec)
		}
	}
	return out
}

func TestPreparedSelectorJoinsTheScopeListed(t *testing.T) {
	c, ns, rec, r, ref := startOnShardOne(t)
	started := r.Stats().Started
	one, two, three := selector+",shard in (1)", selector+",shard in (2)", selector+",shard in (3)"

	pos := rec.mark()
	if err := r.Prepare(two, three, one); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, r, 3)
	if s := r.Stats(); s.Started != started+2 || s.CachedObjects != 1 {
		t.Fatalf("after Prepare: started %d (want %d: one per prepared selector, not the scope's again), cached %d (want 1)",
			s.Started, started+2, s.CachedObjects)
	}
	// The scope is as it was: the ref stays Synced and reads do not see
	// what the prepared informers cache.
	if st := r.State(ref); st != watchregistry.StateSynced {
		t.Fatalf("state while selectors are prepared: %s, want Synced", st)
	}
	if _, err := r.Get(ref, ns, "b"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of an object only a prepared selector selects: %v, want NotFound", err)
	}
	// Their events are not delivered. The barrier: a create the prepared
	// informer saw after the update (one watch, in order).
	patchConfigMap(t, c.cs, ns, "b", `{"data":{"k":"1"}}`)
	d := configMap(ns, "d", "owner-d", nil)
	d.Labels["shard"] = "2"
	createConfigMap(t, c.cs, d)
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		return slices.Contains(watchregistry.PreparedOwners(r, ref, two), "owner-d"), nil
	})
	if err != nil {
		t.Fatalf("the prepared informer did not note d's owner: %v", err)
	}
	if got := rec.since(pos); len(got) != 0 {
		t.Fatalf("events delivered while only prepared:\n%s", rec.dump(pos))
	}

	// Adding a prepared selector that has listed: the scope widens at once,
	// without turning Pending, and no new informer; the owners of what it
	// saw are woken, the trackers are not.
	if err := r.SetLabelSelectors(one, two); err != nil {
		t.Fatal(err)
	}
	if st := r.State(ref); st != watchregistry.StateSynced {
		t.Fatalf("state once a listed prepared selector joined: %s, want Synced", st)
	}
	for _, name := range []string{"a", "b", "d"} {
		if _, err := r.Get(ref, ns, name); err != nil {
			t.Fatalf("Get %s once the prepared selector joined: %v", name, err)
		}
	}
	rec.waitAfter(t, pos, "owner-b woken", isType(watchregistry.EventInitialList, "owner-b"))
	rec.waitAfter(t, pos, "owner-d woken", isType(watchregistry.EventInitialList, "owner-d"))
	if s := r.Stats(); s.Started != started+2 || s.CachedObjects != 3 {
		t.Fatalf("after the prepared selector joined: started %d (want %d), cached %d (want 3)", s.Started, started+2, s.CachedObjects)
	}
	// It delivers events now.
	patchConfigMap(t, c.cs, ns, "b", `{"data":{"k":"2"}}`)
	rec.waitAfter(t, pos, "b's update once in the scope", isEvent(watchregistry.EventUpdated, "b"))
	if n := len(filterRecords(rec.since(pos), isType(watchregistry.EventInitialList, "owner-a"))); n != 0 {
		t.Fatalf("the tracker was woken %d times by a selector that joined listed:\n%s", n, rec.dump(pos))
	}
	if err := watchregistry.CheckInvariants(r); err != nil {
		t.Fatal(err)
	}

	// Prepare() stops the prepared informer no selector took, alone.
	if err := r.Prepare(); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, r, 2)
	if st := r.State(ref); st != watchregistry.StateSynced {
		t.Fatalf("state once the prepared informers stopped: %s", st)
	}
	if _, err := r.Get(ref, ns, "c"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of an object of a dropped prepared selector: %v, want NotFound", err)
	}

	// A selector prepared just before it joins (listed or not: a prepared
	// informer still listing makes the ref Pending until it has, as when
	// widened), and a ref tracked while a selector is prepared, which gets
	// an informer of it too.
	if err := r.Prepare(three); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, r, 3)
	pos = rec.mark()
	if err := r.SetLabelSelectors(one, two, three); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitForSync(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ref, ns, "c"); err != nil {
		t.Fatalf("Get c once its selector joined: %v", err)
	}
	rec.waitAfter(t, pos, "owner-c woken", isType(watchregistry.EventInitialList, "owner-c"))
	secrets := watchregistry.Ref{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: ns}
	if err := r.Prepare(selector + ",shard in (4)"); err != nil {
		t.Fatal(err)
	}
	track(t, r, "owner-a", ref, secrets)
	waitState(t, r, secrets, watchregistry.StateSynced)
	waitRunning(t, r, 8) // two refs: three selectors and one prepared each
	if err := watchregistry.CheckInvariants(r); err != nil {
		t.Fatal(err)
	}
}

// startOnShardOne creates, in a new namespace, ConfigMaps a, b and c of
// owner-a, owner-b and owner-c, labelled shard 1, 2 and 3, and starts a
// registry of the shard 1 selector, with owner-a tracking the namespace's
// ConfigMaps, synced.
func startOnShardOne(t *testing.T) (clients, string, *recorder, *watchregistry.Registry[string], watchregistry.Ref) {
	t.Helper()
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	for name, shard := range map[string]string{"a": "1", "b": "2", "c": "3"} {
		cm := configMap(ns, name, "owner-"+name, nil)
		cm.Labels["shard"] = shard
		createConfigMap(t, c.cs, cm)
	}
	rec := &recorder{}
	r := startRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue, LabelSelector: selector + ",shard in (1)"})
	ref := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	track(t, r, "owner-a", ref)
	waitState(t, r, ref, watchregistry.StateSynced)
	// The ref turns Synced before the informer's goroutine wakes the owners
	// of its first list; callers mark positions and count wakes after this,
	// so the wake must have landed already.
	rec.waitAfter(t, 0, "owner-a woken by the first list", isType(watchregistry.EventInitialList, "owner-a"))
	return c, ns, rec, r, ref
}

// createSharded creates, in ns, a managed ConfigMap for each name, of the
// owner and in the shard given.
func createSharded(t *testing.T, c clients, ns string, objects map[string][2]string) {
	t.Helper()
	for name, o := range objects {
		cm := configMap(ns, name, o[0], nil)
		cm.Labels["shard"] = o[1]
		createConfigMap(t, c.cs, cm)
	}
}

// TestAListedPreparedSelectorJoiningAPendingRefWakesOnceSynced adds a
// prepared selector that has listed together with one still to list,
// before or after it: the ref is Pending until the latter has listed, and
// the owners of what the former saw are woken then, when their reads
// succeed, not before.
func TestAListedPreparedSelectorJoiningAPendingRefWakesOnceSynced(t *testing.T) {
	one, two, three := selector+",shard in (1)", selector+",shard in (2)", selector+",shard in (3)"
	for _, tc := range []struct {
		name      string
		selectors []string
	}{
		{"prepared selector added first", []string{one, three, two}},
		{"prepared selector added last", []string{one, two, three}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClients(t, controlPlane(t))
			ns := newNamespace(t, c.cs)
			createSharded(t, c, ns, map[string][2]string{"a": {"owner-a", "1"}, "b": {"owner-b", "2"}, "c": {"owner-c", "3"}})
			// Map holds b, listed by the selector that is not prepared: the
			// ref is Pending until the test lets it go.
			hold := newHoldingMap(1, func(ev watchregistry.Event) bool { return ev.Object.GetName() == "b" })
			rec := &recorder{}
			woken := make(chan watchregistry.State, 4)
			var r *watchregistry.Registry[string]
			r = startRegistry(t, c, watchregistry.Options[string]{LabelSelector: one, Map: hold.mapFunc, Enqueue: func(key string, ev watchregistry.Event) {
				rec.enqueue(key, ev)
				if key == "owner-c" && ev.Type == watchregistry.EventInitialList {
					woken <- r.State(ev.Ref)
				}
			}})
			// Cleanups run last first: the Map lets go before Run is waited for.
			t.Cleanup(hold.release)
			ref := watchregistry.Ref{GVR: configMaps, Namespace: ns}
			track(t, r, "owner-a", ref)
			waitState(t, r, ref, watchregistry.StateSynced)
			if err := r.Prepare(three); err != nil {
				t.Fatal(err)
			}
			err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
				return watchregistry.PreparedSynced(r, ref, three), nil
			})
			if err != nil {
				t.Fatalf("the prepared informer did not list: %v", err)
			}

			if err := r.SetLabelSelectors(tc.selectors...); err != nil {
				t.Fatal(err)
			}
			// The owners SetLabelSelectors wakes at once are woken before it
			// returns.
			select {
			case st := <-woken:
				t.Fatalf("owner-c woken while the ref is %s, before the added selector has listed", st)
			default:
			}
			waitClosed(t, hold.blocked, "the added selector's list")
			hold.release()
			select {
			case st := <-woken:
				if st != watchregistry.StateSynced {
					t.Fatalf("owner-c woken while the ref is %s, want Synced", st)
				}
			case <-time.After(waitFor):
				t.Fatalf("owner-c not woken once the ref synced; got:\n%s", rec.dump(0))
			}
			if _, err := r.Get(ref, ns, "c"); err != nil {
				t.Fatalf("Get c once woken: %v", err)
			}
			checkInvariants(t, r)
		})
	}
}

// TestOwnersOfAScopeWidenedAsTheRefSyncsWaitForItsList widens the scope
// right after a ref has synced and before its owners are woken: the owners
// that the added selector's list collects meanwhile are woken once that
// list is done, when their reads succeed, not by the sync before it.
func TestOwnersOfAScopeWidenedAsTheRefSyncsWaitForItsList(t *testing.T) {
	one, two := selector+",shard in (1)", selector+",shard in (2)"
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	createSharded(t, c, ns, map[string][2]string{"a": {"owner-a", "1"}, "x-1": {"owner-x", "2"}, "x-2": {"owner-x", "2"}})
	// Map holds the second object of the added selector's list, whichever
	// comes second: the owner of the first has been collected by then, and
	// the ref is Pending until the test lets it go.
	hold := newHoldingMap(2, func(ev watchregistry.Event) bool { return ev.Object.GetLabels()["shard"] == "2" })
	rec := &recorder{}
	woken := make(chan watchregistry.State, 4)
	var r *watchregistry.Registry[string]
	r = newRegistry(t, c, watchregistry.Options[string]{LabelSelector: one, Map: hold.mapFunc, Enqueue: func(key string, ev watchregistry.Event) {
		rec.enqueue(key, ev)
		if key == "owner-x" && ev.Type == watchregistry.EventInitialList {
			woken <- r.State(ev.Ref)
		}
	}})
	ref := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	var widened atomic.Bool
	hooked := make(chan struct{})
	watchregistry.OnSynced(r, func(synced watchregistry.Ref) {
		if synced != ref || !widened.CompareAndSwap(false, true) {
			return
		}
		defer close(hooked)
		if err := r.SetLabelSelectors(one, two); err != nil {
			t.Error(err)
			return
		}
		select {
		case <-hold.blocked:
		case <-time.After(waitFor):
			t.Errorf("the added selector's list did not reach its second object within %s", waitFor)
		}
	})
	run(t, r)
	t.Cleanup(hold.release)

	track(t, r, "owner-a", ref)
	waitClosed(t, hooked, "the scope widened as the ref synced")
	hold.release()
	select {
	case st := <-woken:
		if st != watchregistry.StateSynced {
			t.Fatalf("owner-x woken while the ref is %s, want Synced", st)
		}
	case <-time.After(waitFor):
		t.Fatalf("owner-x not woken once the added list synced; got:\n%s", rec.dump(0))
	}
	if _, err := r.Get(ref, ns, "x-1"); err != nil {
		t.Fatalf("Get x-1 once woken: %v", err)
	}
	rec.waitAfter(t, 0, "owner-a woken", isType(watchregistry.EventInitialList, "owner-a"))
	checkInvariants(t, r)
}

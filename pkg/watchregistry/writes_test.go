// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// gate holds back the delivery of one object's event, so that a test can
// call ExpectWrite before the events of its own write are handled, whatever
// the race between the API response and the watch.
type gate struct {
	name    string
	open    chan struct{}
	blocked chan struct{}
	once    sync.Once
}

func newGate(name string) *gate {
	return &gate{name: name, open: make(chan struct{}), blocked: make(chan struct{})}
}

func (g *gate) mapFunc(ev watchregistry.Event) []string {
	if ev.Object.GetName() == g.name && ev.Type != watchregistry.EventInitialList {
		g.once.Do(func() {
			close(g.blocked)
			<-g.open
		})
	}
	return testMap(ev)
}

func TestOwnWritesAreNotDelivered(t *testing.T) {
	g := newGate("gate")
	c, ns, r, rec, ref := watched(t, watchregistry.Options[string]{Map: g.mapFunc})
	ctx := context.Background()

	// Hold the informer's delivery on an unrelated object's event...
	createConfigMap(t, c.cs, configMap(ns, "gate", "someone", nil))
	<-g.blocked
	pos := rec.mark()
	// ...while the owner creates, updates and deletes objects of its own and
	// announces each write.
	created := createConfigMap(t, c.cs, configMap(ns, "mine", "owner", map[string]string{"k": "v1"}))
	r.ExpectWrite(ref, created)
	updated := patchConfigMap(t, c.cs, ns, "mine", `{"data":{"k":"v2"}}`)
	r.ExpectWrite(ref, updated)
	shortLived := createConfigMap(t, c.cs, configMap(ns, "short-lived", "owner", nil))
	r.ExpectDelete(ref, shortLived)
	if err := c.cs.CoreV1().ConfigMaps(ns).Delete(ctx, "short-lived", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Somebody else then edits the owner's object.
	foreign := patchConfigMap(t, c.cs, ns, "mine", `{"data":{"k":"hand-edit"}}`)
	close(g.open)

	got := rec.waitAfter(t, pos, "the foreign edit", isEvent(watchregistry.EventUpdated, "mine"))
	if got.ev.Object.GetResourceVersion() != foreign.ResourceVersion {
		t.Fatalf("first update delivered: %s, want the foreign edit at %s", got, foreign.ResourceVersion)
	}
	var delivered []string
	for _, rec := range rec.since(pos) {
		if rec.ev.Object != nil && rec.ev.Object.GetName() != "gate" {
			delivered = append(delivered, fmt.Sprintf("%s %s", rec.ev.Type, rec.ev.Object.GetName()))
		}
	}
	// short-lived's add was not announced with its resourceVersion, so it is
	// delivered; its delete was announced and is not.
	want := []string{"Added short-lived", "Updated mine"}
	if diff := cmp.Diff(want, delivered); diff != "" {
		t.Fatalf("delivered events (-want +got):\n%s", diff)
	}
	if n := r.Stats().Filtered[watchregistry.FilterOwnWrite]; n != 3 {
		t.Fatalf("own-write filtered: %d, want 3", n)
	}
}

func TestCreationsByTheOwnersFieldManagerAreOwnWrites(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	c, ns, r, rec, ref := watched(t, watchregistry.Options[string]{FieldManager: "the-owner", Clock: clk})
	ctx := context.Background()
	create := func(name, manager string) *corev1.ConfigMap {
		t.Helper()
		cm, err := c.cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap(ns, name, "owner", nil), metav1.CreateOptions{FieldManager: manager})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	// No ExpectWrite before the events: the owner's answer is "late".
	mine := create("mine", "the-owner")
	create("theirs", "someone-else")
	rec.waitAfter(t, 0, "the add of theirs", isEvent(watchregistry.EventAdded, "theirs"))
	if n := rec.count(forObject("mine")); n != 0 {
		t.Fatalf("the owner's own creation was enqueued %d times", n)
	}
	if n := r.Stats().Filtered[watchregistry.FilterOwnWrite]; n != 1 {
		t.Fatalf("own-write filtered: %d, want 1", n)
	}
	// The answer arrives after the event: the expectation is held for
	// seconds, not for the TTL of a minute.
	r.ExpectWrite(ref, mine)
	clk.Step(6 * time.Second)
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return r.Stats().Expectations == 0, nil
	})
	if err != nil {
		t.Fatalf("a late expectation is still held 6s after: %d", r.Stats().Expectations)
	}
	// An edit of the owner's object by someone else is still delivered.
	edited := patchConfigMap(t, c.cs, ns, "mine", `{"data":{"k":"hand-edit"}}`)
	got := rec.waitAfter(t, 0, "the edit of mine", isEvent(watchregistry.EventUpdated, "mine"))
	if got.ev.Object.GetResourceVersion() != edited.ResourceVersion {
		t.Fatalf("delivered %s, want the edit at %s", got, edited.ResourceVersion)
	}
}

// TestOwnWriteAnsweredAfterItsEventIsNotDelivered provokes, every time, the
// race BeginWrite exists for: the watch delivers a write's event before the
// writer has the write's answer, and so before it knows the version to
// expect.
func TestOwnWriteAnsweredAfterItsEventIsNotDelivered(t *testing.T) {
	c, ns, r, rec, ref := watched(t, watchregistry.Options[string]{})
	mine := createConfigMap(t, c.cs, configMap(ns, "mine", "owner", map[string]string{"k": "v0"}))
	createConfigMap(t, c.cs, configMap(ns, "marker", "owner", nil))
	rec.waitAfter(t, 0, "the add of marker", isEvent(watchregistry.EventAdded, "marker"))
	// barrier returns once the informer has handled every event before an
	// edit of marker: it handles them in order, one at a time.
	marks := 0
	barrier := func(t *testing.T) {
		t.Helper()
		marks++
		pos := rec.mark()
		edit := patchConfigMap(t, c.cs, ns, "marker", fmt.Sprintf(`{"data":{"mark":"%d"}}`, marks))
		rec.waitAfter(t, pos, "the edit of marker", func(rec record) bool {
			return rec.ev.Object != nil && rec.ev.Object.GetName() == "marker" && rec.ev.Object.GetResourceVersion() == edit.ResourceVersion
		})
	}
	ofMine := func(pos int) []string {
		var out []string
		for _, rec := range rec.since(pos) {
			if rec.ev.Object != nil && rec.ev.Object.GetName() == "mine" {
				out = append(out, fmt.Sprintf("%s %s", rec.ev.Type, rec.ev.Object.GetResourceVersion()))
			}
		}
		return out
	}

	t.Run("answered after the event", func(t *testing.T) {
		pos, before := rec.mark(), r.Stats()
		w := r.BeginWrite(ref, mine)
		updated := patchConfigMap(t, c.cs, ns, "mine", `{"data":{"k":"v1"}}`)
		waitHolding(t, r, 1)
		w.Done(updated)
		barrier(t)
		if got := ofMine(pos); len(got) != 0 {
			t.Fatalf("the own write was delivered: %v", got)
		}
		s := r.Stats()
		if own := s.Filtered[watchregistry.FilterOwnWrite] - before.Filtered[watchregistry.FilterOwnWrite]; own != 1 || s.Held-before.Held != 1 || s.Holding != 0 || s.WritesInFlight != 0 {
			t.Fatalf("own-write filtered %d, held %d, want 1 each; holding %d, in flight %d, want 0", own, s.Held-before.Held, s.Holding, s.WritesInFlight)
		}
	})

	t.Run("aborted", func(t *testing.T) {
		pos := rec.mark()
		w := r.BeginWrite(ref, mine)
		updated := patchConfigMap(t, c.cs, ns, "mine", `{"data":{"k":"v2"}}`)
		waitHolding(t, r, 1)
		w.Abort()
		barrier(t)
		if diff := cmp.Diff([]string{"Updated " + updated.ResourceVersion}, ofMine(pos)); diff != "" {
			t.Fatalf("events of mine (-want +got):\n%s", diff)
		}
	})

	t.Run("someone else's write during the hold", func(t *testing.T) {
		pos := rec.mark()
		w := r.BeginWrite(ref, mine)
		own := patchConfigMap(t, c.cs, ns, "mine", `{"data":{"k":"v3"}}`)
		foreign := patchConfigMap(t, c.cs, ns, "mine", `{"data":{"k":"hand-edit"}}`)
		waitHolding(t, r, 2)
		w.Done(own)
		barrier(t)
		if diff := cmp.Diff([]string{"Updated " + foreign.ResourceVersion}, ofMine(pos)); diff != "" {
			t.Fatalf("events of mine (-want +got):\n%s", diff)
		}
	})

	t.Run("answered before the event", func(t *testing.T) {
		pos := rec.mark()
		w := r.BeginWrite(ref, mine)
		updated := patchConfigMap(t, c.cs, ns, "mine", `{"data":{"k":"v4"}}`)
		w.Done(updated)
		barrier(t)
		if got := ofMine(pos); len(got) != 0 {
			t.Fatalf("the own write was delivered: %v", got)
		}
	})

	// Last, as it takes mine out of sight: the watch reports a write that
	// leaves the label selector as a delete at the write's version.
	t.Run("a write that leaves the selector", func(t *testing.T) {
		pos := rec.mark()
		w := r.BeginWrite(ref, mine)
		released := patchConfigMap(t, c.cs, ns, "mine", `{"metadata":{"labels":{"`+managedBy+`":null}}}`)
		waitHolding(t, r, 1)
		w.Done(released)
		barrier(t)
		if got := ofMine(pos); len(got) != 0 {
			t.Fatalf("the own write was delivered: %v", got)
		}
	})
}

func TestEventsHeldForAWriteThatNeverEndsAreDeliveredAfterTheHold(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	c, ns, r, rec, ref := watched(t, watchregistry.Options[string]{Clock: clk, WriteHold: 3 * time.Second})
	mine := createConfigMap(t, c.cs, configMap(ns, "mine", "owner", nil))
	rec.waitAfter(t, 0, "the add of mine", isEvent(watchregistry.EventAdded, "mine"))
	pos := rec.mark()
	r.BeginWrite(ref, mine) // never ended: the writer lost track of it
	updated := patchConfigMap(t, c.cs, ns, "mine", `{"data":{"k":"v1"}}`)
	waitHolding(t, r, 1)
	clk.Step(4 * time.Second)
	got := rec.waitAfter(t, pos, "the held event", forObject("mine"))
	if got.ev.Type != watchregistry.EventUpdated || got.ev.Object.GetResourceVersion() != updated.ResourceVersion {
		t.Fatalf("delivered %s, want Updated at %s", got, updated.ResourceVersion)
	}
	if s := r.Stats(); s.WritesInFlight != 0 || s.Holding != 0 {
		t.Fatalf("after the hold: %d writes in flight, %d events held, want none", s.WritesInFlight, s.Holding)
	}
}

// waitHolding waits until the registry holds n events for writes in flight:
// the informer has received them.
func waitHolding(t *testing.T, r *watchregistry.Registry[string], n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		return r.Stats().Holding == n, nil
	})
	if err != nil {
		t.Fatalf("events held: %d, want %d", r.Stats().Holding, n)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

func checkInvariants(t *testing.T, r *watchregistry.Registry[string]) {
	t.Helper()
	if err := watchregistry.CheckInvariants(r); err != nil {
		t.Fatal(err)
	}
}

func TestAllNamespacesInformerServesNamespacedRefs(t *testing.T) {
	c := newClients(t, controlPlane(t))
	ns, elsewhere := newNamespace(t, c.cs), newNamespace(t, c.cs)
	rec := &recorder{}
	r := startRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue})
	wide := watchregistry.Ref{GVR: configMaps}
	narrow := watchregistry.Ref{GVR: configMaps, Namespace: ns}

	track(t, r, "a", wide)
	waitState(t, r, wide, watchregistry.StateSynced)
	started := r.Stats().Started
	track(t, r, "b", narrow)
	if st := r.State(narrow); st != watchregistry.StateSynced {
		t.Fatalf("namespaced ref under a synced all-namespaces informer: %s, want Synced at once", st)
	}
	if snap, ok := r.Snapshot(narrow); !ok || snap.ServedBy != wide || snap.Owners != 1 {
		t.Fatalf("snapshot of the namespaced ref: %+v, %v; want served by %s for one owner", snap, ok, wide)
	}
	if s := r.Stats(); s.Started != started || s.Informers[watchregistry.StateSynced] != 1 {
		t.Fatalf("stats: %+v; want no new informer", s)
	}
	checkInvariants(t, r)

	createConfigMap(t, c.cs, configMap(elsewhere, "other", "b", nil))
	createConfigMap(t, c.cs, configMap(ns, "mine", "b", nil))
	rec.waitAfter(t, 0, "the add in the tracked namespace", isEvent(watchregistry.EventAdded, "mine"))
	list, err := r.List(narrow, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"mine"}, names(list)); diff != "" {
		t.Fatalf("List of the namespaced ref (-want +got):\n%s", diff)
	}
	if _, err := r.Get(narrow, ns, "mine"); err != nil {
		t.Fatalf("Get through the namespaced ref: %v", err)
	}
	if _, err := r.Get(narrow, elsewhere, "other"); err == nil {
		t.Fatal("Get of another namespace through the namespaced ref succeeded")
	}

	// The owner of the all-namespaces ref leaves: its informer keeps serving
	// the namespaced ref, with no new list.
	r.Forget("a")
	checkInvariants(t, r)
	if st := r.State(narrow); st != watchregistry.StateSynced {
		t.Fatalf("namespaced ref after the all-namespaces owner left: %s, want Synced", st)
	}
	if got := r.Owners(wide); got != nil {
		t.Fatalf("owners of the forgotten ref: %v, want none", got)
	}
	if diff := cmp.Diff([]string{"b"}, r.Owners(narrow)); diff != "" {
		t.Fatalf("owners of the namespaced ref (-want +got):\n%s", diff)
	}
	pos := rec.mark()
	patchConfigMap(t, c.cs, ns, "mine", `{"data":{"k":"edited"}}`)
	rec.waitAfter(t, pos, "the edit after the wide owner left", isEvent(watchregistry.EventUpdated, "mine"))
	if s := r.Stats(); s.Started != started || s.Running != 1 {
		t.Fatalf("stats: %+v; want the one informer still running", s)
	}

	// The last owner leaves: the informer lingers, then stops.
	r.Forget("b")
	waitState(t, r, narrow, watchregistry.StateNotTracked)
	waitRunning(t, r, 0)
	checkInvariants(t, r)
}

func TestAllNamespacesInformerTakesOverNamespacedInformersOnceSynced(t *testing.T) {
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	rec := &recorder{}
	r := startRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue})
	wide := watchregistry.Ref{GVR: configMaps}
	narrow := watchregistry.Ref{GVR: configMaps, Namespace: ns}

	track(t, r, "b", narrow)
	waitState(t, r, narrow, watchregistry.StateSynced)
	track(t, r, "a", wide)
	waitState(t, r, wide, watchregistry.StateSynced)
	// The namespaced informer stops; its ref stays readable throughout.
	waitRunning(t, r, 1)
	if snap, _ := r.Snapshot(narrow); snap.ServedBy != wide || snap.State != watchregistry.StateSynced {
		t.Fatalf("snapshot after the take-over: %+v, want Synced, served by %s", snap, wide)
	}
	checkInvariants(t, r)

	pos := rec.mark()
	createConfigMap(t, c.cs, configMap(ns, "after", "b", nil))
	got := rec.waitAfter(t, pos, "the add after the take-over", isEvent(watchregistry.EventAdded, "after"))
	if got.ev.Ref != wide {
		t.Fatalf("event from %s, want from the all-namespaces informer", got.ev.Ref)
	}
	if _, err := r.Get(narrow, ns, "after"); err != nil {
		t.Fatal(err)
	}
	diff := cmp.Diff([]watchregistry.RefSnapshot{{Ref: wide}, {Ref: narrow}}, r.Snapshots(), cmp.Comparer(func(a, b watchregistry.RefSnapshot) bool {
		return a.Ref == b.Ref
	}))
	if diff != "" {
		t.Fatalf("snapshots (-want +got):\n%s", diff)
	}
}

// TestOwnWriteThroughAnotherRefIsNotDelivered announces writes through a
// namespaced ref while an all-namespaces informer delivers their events:
// expectations belong to the object, not to the ref.
func TestOwnWriteThroughAnotherRefIsNotDelivered(t *testing.T) {
	g := newGate("gate")
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	rec := &recorder{}
	r := startRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue, Map: g.mapFunc})
	wide := watchregistry.Ref{GVR: configMaps}
	narrow := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	track(t, r, "owner", wide)
	waitState(t, r, wide, watchregistry.StateSynced)

	createConfigMap(t, c.cs, configMap(ns, "gate", "someone", nil))
	<-g.blocked
	pos := rec.mark()
	created := createConfigMap(t, c.cs, configMap(ns, "mine", "owner", nil))
	r.ExpectWrite(narrow, created)
	updated := patchConfigMap(t, c.cs, ns, "mine", `{"data":{"k":"v2"}}`)
	r.ExpectWrite(narrow, updated)
	r.ExpectDelete(narrow, updated)
	if err := c.cs.CoreV1().ConfigMaps(ns).Delete(context.Background(), "mine", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The barrier: a later object nobody announced.
	createConfigMap(t, c.cs, configMap(ns, "barrier", "owner", nil))
	close(g.open)
	rec.waitAfter(t, pos, "the barrier's add", isEvent(watchregistry.EventAdded, "barrier"))
	var delivered []string
	for _, rec := range rec.since(pos) {
		if rec.ev.Object != nil && rec.ev.Object.GetName() != "gate" {
			delivered = append(delivered, fmt.Sprintf("%s %s", rec.ev.Type, rec.ev.Object.GetName()))
		}
	}
	if diff := cmp.Diff([]string{"Added barrier"}, delivered); diff != "" {
		t.Fatalf("delivered events (-want +got):\n%s", diff)
	}
}

// TestAllNamespacesInformerTakesOverAFailedNamespacedRef: a namespaced ref
// whose informer was refused, and waits for its retry, is served by an
// all-namespaces informer of its resource as soon as that one has synced,
// rather than by a retry that would cache, and charge, the namespace's
// objects a second time; its owner, whose reads failed, is woken.
func TestAllNamespacesInformerTakesOverAFailedNamespacedRef(t *testing.T) {
	admin := newClients(t, controlPlane(t))
	ns := newNamespace(t, admin.cs)
	scope := selector + ",takeover=" + ns
	cm := configMap(ns, "mine", "owner-n", nil)
	cm.Labels["takeover"] = ns
	createConfigMap(t, admin.cs, cm)
	deny := &refuser{path: "/api/v1/namespaces/" + ns + "/configmaps"}
	deny.on.Store(true)
	c := newClients(t, deny.wrap(controlPlane(t)))
	rec := &recorder{}
	budget := watchregistry.NewBudget(100)
	r := newRegistry(t, c, watchregistry.Options[string]{
		Enqueue: rec.enqueue, LabelSelector: scope, RetryFailed: true, Clock: testingclock.NewFakeClock(time.Now()),
	})
	r.SetCluster("", c.dyn, c.md, watchregistry.WithBudget(budget))
	run(t, r)
	narrow := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	wide := watchregistry.Ref{GVR: configMaps}

	track(t, r, "owner-n", narrow)
	waitState(t, r, narrow, watchregistry.StateForbidden)
	rec.waitAfter(t, 0, "owner-n told of the refusal", isType(watchregistry.EventStateChanged, "owner-n"))
	// From now on a retry of the namespaced informer would list.
	deny.on.Store(false)
	pos := rec.mark()
	track(t, r, "owner-w", wide)
	waitState(t, r, wide, watchregistry.StateSynced)

	snap, _ := r.Snapshot(narrow)
	if snap.ServedBy != wide || snap.State != watchregistry.StateSynced || !snap.NextRetry.IsZero() || snap.LastError != nil {
		t.Fatalf("snapshot of the failed ref once the all-namespaces informer synced: %+v; want Synced, served by %s, no retry", snap, wide)
	}
	if s := r.Stats(); !cmp.Equal(nonZero(s.Informers), map[watchregistry.State]int{watchregistry.StateSynced: 1}) {
		t.Fatalf("informers by state: %v, want the all-namespaces one alone", nonZero(s.Informers))
	}
	rec.waitAfter(t, pos, "owner-n woken", isType(watchregistry.EventInitialList, "owner-n"))
	if _, err := r.Get(narrow, ns, "mine"); err != nil {
		t.Fatalf("Get through the taken-over ref: %v", err)
	}
	waitRunning(t, r, 1)
	waitUsed(t, budget, 1)
	checkInvariants(t, r)
}

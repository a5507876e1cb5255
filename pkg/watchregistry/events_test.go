// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// watched starts a registry tracking the ConfigMaps of a fresh namespace for
// owner "owner" and waits for the sync.
func watched(t *testing.T, opts watchregistry.Options[string]) (clients, string, *watchregistry.Registry[string], *recorder, watchregistry.Ref) {
	t.Helper()
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	rec := &recorder{}
	if opts.Enqueue == nil {
		opts.Enqueue = rec.enqueue
	}
	r := startRegistry(t, c, opts)
	ref := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	track(t, r, "owner", ref)
	waitState(t, r, ref, watchregistry.StateSynced)
	return c, ns, r, rec, ref
}

func TestConfigMapDataChangeIsDelivered(t *testing.T) {
	c, ns, r, rec, _ := watched(t, watchregistry.Options[string]{})
	createConfigMap(t, c.cs, configMap(ns, "settings", "owner", map[string]string{"k": "v1"}))
	rec.waitAfter(t, 0, "the add", isEvent(watchregistry.EventAdded, "settings"))

	pos := rec.mark()
	changed := patchConfigMap(t, c.cs, ns, "settings", `{"data":{"k":"v2"}}`)
	got := rec.waitAfter(t, pos, "the data change", forObject("settings"))
	if got.ev.Type != watchregistry.EventUpdated || got.key != "owner" || got.ev.Object.GetResourceVersion() != changed.ResourceVersion {
		t.Fatalf("first event after the data change: %s, want Updated at %s for owner", got, changed.ResourceVersion)
	}
	if v, _, _ := unstructured.NestedString(got.ev.Old.Object, "data", "k"); v != "v1" {
		t.Fatalf("Old carries data.k=%q, want v1", v)
	}
	if s := r.Stats(); s.Delivered < 2 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestLabelAndAnnotationEditsAreDelivered(t *testing.T) {
	c, ns, _, rec, _ := watched(t, watchregistry.Options[string]{})
	createConfigMap(t, c.cs, configMap(ns, "labelled", "owner", nil))
	rec.waitAfter(t, 0, "the add", isEvent(watchregistry.EventAdded, "labelled"))

	for _, patch := range []string{
		`{"metadata":{"labels":{"edited":"by-hand"}}}`,
		`{"metadata":{"annotations":{"note":"by-hand"}}}`,
	} {
		pos := rec.mark()
		changed := patchConfigMap(t, c.cs, ns, "labelled", patch)
		got := rec.waitAfter(t, pos, "the edit "+patch, forObject("labelled"))
		if got.ev.Type != watchregistry.EventUpdated || got.ev.Object.GetResourceVersion() != changed.ResourceVersion {
			t.Fatalf("first event after %s: %s, want Updated at %s", patch, got, changed.ResourceVersion)
		}
	}
}

func TestDeleteIsDeliveredWithTheLastKnownObject(t *testing.T) {
	c, ns, _, rec, _ := watched(t, watchregistry.Options[string]{})
	createConfigMap(t, c.cs, configMap(ns, "doomed", "owner", map[string]string{"k": "v"}))
	rec.waitAfter(t, 0, "the add", isEvent(watchregistry.EventAdded, "doomed"))

	pos := rec.mark()
	if err := c.cs.CoreV1().ConfigMaps(ns).Delete(context.Background(), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got := rec.waitAfter(t, pos, "the delete", forObject("doomed"))
	if got.ev.Type != watchregistry.EventDeleted || got.key != "owner" {
		t.Fatalf("first event after the delete: %s, want Deleted for owner", got)
	}
	if v, _, _ := unstructured.NestedString(got.ev.Object.Object, "data", "k"); v != "v" {
		t.Fatalf("deleted object carries data.k=%q, want the last known v", v)
	}
}

func TestStatusOnlyUpdateIsNotDelivered(t *testing.T) {
	for _, tc := range []struct {
		name              string
		kind              string
		statusSubresource bool
		metadataOnly      bool
	}{
		// With a status subresource, the status write is a separate request.
		{"status subresource", "Gadget", true, false},
		// Without one, status is written with the object and bumps
		// metadata.generation, which must not count as a change either.
		{"no status subresource", "Gizmo", false, false},
		// Metadata-only objects show the status write as a new
		// resourceVersion and managedFields entry only.
		{"metadata-only", "Gimmick", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin := newClients(t, controlPlane(t))
			ns := newNamespace(t, admin.cs)
			gvr := crd(t, admin, "status.watchregistry.test", tc.kind, tc.statusSubresource)
			rec := &recorder{}
			r := startRegistry(t, admin, watchregistry.Options[string]{Enqueue: rec.enqueue, MetadataOnly: tc.metadataOnly})
			ref := watchregistry.Ref{GVR: gvr, Namespace: ns}
			track(t, r, "owner", ref)
			waitState(t, r, ref, watchregistry.StateSynced)
			ctx := context.Background()
			client := admin.dyn.Resource(gvr).Namespace(ns)

			obj, err := client.Create(ctx, customResource(gvr, tc.kind, ns, "cr", "owner"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rec.waitAfter(t, 0, "the add", isEvent(watchregistry.EventAdded, "cr"))

			pos := rec.mark()
			if err := unstructured.SetNestedField(obj.Object, "Ready", "status", "phase"); err != nil {
				t.Fatal(err)
			}
			if tc.statusSubresource {
				_, err = client.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
			} else {
				_, err = client.Update(ctx, obj, metav1.UpdateOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
			// Events of one informer arrive in order: if the status write were
			// delivered, it would come before this label edit.
			barrier, err := client.Patch(ctx, "cr", types.MergePatchType, []byte(`{"metadata":{"labels":{"barrier":"1"}}}`), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := rec.waitAfter(t, pos, "the label edit", forObject("cr"))
			if got.ev.Object.GetResourceVersion() != barrier.GetResourceVersion() {
				t.Fatalf("first event after the status write: %s, want the label edit at %s", got, barrier.GetResourceVersion())
			}
			if n := r.Stats().Filtered[watchregistry.FilterStatusOnly]; n != 1 {
				t.Fatalf("status-only filtered: %d, want 1", n)
			}

			// A spec change is delivered; for metadata-only objects the new
			// generation is all that shows it.
			pos = rec.mark()
			changed, err := client.Patch(ctx, "cr", types.MergePatchType, []byte(`{"spec":{"size":2}}`), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got = rec.waitAfter(t, pos, "the spec change", forObject("cr"))
			if got.ev.Type != watchregistry.EventUpdated || got.ev.Object.GetResourceVersion() != changed.GetResourceVersion() {
				t.Fatalf("first event after the spec change: %s, want Updated at %s", got, changed.GetResourceVersion())
			}
		})
	}
}

func TestStatusOnlyUpdateIsDeliveredWhenAskedFor(t *testing.T) {
	admin := newClients(t, controlPlane(t))
	ns := newNamespace(t, admin.cs)
	gvr := crd(t, admin, "status.watchregistry.test", "Doohickey", true)
	rec := &recorder{}
	r := startRegistry(t, admin, watchregistry.Options[string]{Enqueue: rec.enqueue, DeliverStatusOnly: true})
	ref := watchregistry.Ref{GVR: gvr, Namespace: ns}
	track(t, r, "owner", ref)
	waitState(t, r, ref, watchregistry.StateSynced)
	ctx := context.Background()
	client := admin.dyn.Resource(gvr).Namespace(ns)
	obj, err := client.Create(ctx, customResource(gvr, "Doohickey", ns, "cr", "owner"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec.waitAfter(t, 0, "the add", isEvent(watchregistry.EventAdded, "cr"))
	pos := rec.mark()
	_ = unstructured.SetNestedField(obj.Object, "Ready", "status", "phase")
	updated, err := client.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := rec.waitAfter(t, pos, "the status write", forObject("cr"))
	if got.ev.Object.GetResourceVersion() != updated.GetResourceVersion() {
		t.Fatalf("first event after the status write: %s, want it at %s", got, updated.GetResourceVersion())
	}
}

func TestUnmappedEventsAreCounted(t *testing.T) {
	c, ns, r, rec, _ := watched(t, watchregistry.Options[string]{})
	createConfigMap(t, c.cs, configMap(ns, "orphan", "", nil))
	createConfigMap(t, c.cs, configMap(ns, "after", "owner", nil))
	rec.waitAfter(t, 0, "the add of the mapped object", isEvent(watchregistry.EventAdded, "after"))
	if n := r.Stats().Filtered[watchregistry.FilterUnmapped]; n != 1 {
		t.Fatalf("unmapped: %d, want 1", n)
	}
	if n := rec.count(forObject("orphan")); n != 0 {
		t.Fatalf("unmapped object enqueued %d times", n)
	}
}

func TestInitialListOfFiveHundredObjectsEnqueuesEachOfFiveOwnersOnce(t *testing.T) {
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	const owners, perOwner = 5, 100
	var wg sync.WaitGroup
	errs := make(chan error, owners)
	for o := range owners {
		wg.Go(func() {
			for i := range perOwner {
				cm := configMap(ns, fmt.Sprintf("o%d-%03d", o, i), fmt.Sprintf("o%d", o), map[string]string{"i": fmt.Sprint(i)})
				if _, err := c.cs.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	rec := &recorder{}
	r := startRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue})
	ref := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	for o := range owners {
		track(t, r, fmt.Sprintf("o%d", o), ref)
	}
	waitState(t, r, ref, watchregistry.StateSynced)
	rec.waitCount(t, "initial-list enqueues", func(r record) bool { return r.ev.Type == watchregistry.EventInitialList }, owners)

	// A later edit is delivered on its own: everything before it has been.
	pos := rec.mark()
	patchConfigMap(t, c.cs, ns, "o0-000", `{"data":{"i":"edited"}}`)
	rec.waitAfter(t, pos, "the edit", isEvent(watchregistry.EventUpdated, "o0-000"))

	var got []string
	for _, rec := range rec.since(0) {
		got = append(got, fmt.Sprintf("%s %s", rec.key, rec.ev.Type))
	}
	want := map[string]int{"o0 InitialList": 1, "o1 InitialList": 1, "o2 InitialList": 1, "o3 InitialList": 1, "o4 InitialList": 1, "o0 Updated": 1}
	if diff := cmp.Diff(want, countStrings(got)); diff != "" {
		t.Fatalf("enqueues (-want +got):\n%s", diff)
	}
	s := r.Stats()
	if s.Received[watchregistry.EventInitialList] != owners*perOwner || s.CachedObjects != owners*perOwner {
		t.Fatalf("stats: %+v, want %d listed and cached objects", s, owners*perOwner)
	}
}

func countStrings(ss []string) map[string]int {
	m := map[string]int{}
	for _, s := range ss {
		m[s]++
	}
	return m
}

func TestStatsReportTheFiguresAndTimings(t *testing.T) {
	c, ns, r, rec, _ := watched(t, watchregistry.Options[string]{})
	createConfigMap(t, c.cs, configMap(ns, "counted", "owner", nil))
	rec.waitAfter(t, 0, "the add", isEvent(watchregistry.EventAdded, "counted"))

	s := r.Stats()
	got := map[string]uint64{
		"informers Synced":       uint64(s.Informers[watchregistry.StateSynced]),
		"informers Forbidden":    uint64(s.Informers[watchregistry.StateForbidden]),
		"running":                uint64(s.Running),
		"owners":                 uint64(s.Owners),
		"cached":                 uint64(s.CachedObjects),
		"received Added":         s.Received[watchregistry.EventAdded],
		"delivered InitialList":  s.DeliveredByType[watchregistry.EventInitialList],
		"delivered Added":        s.DeliveredByType[watchregistry.EventAdded],
		"sync duration count":    s.SyncDuration.Count,
		"handler lag count":      s.HandlerLag.Count, // the add
		"handler lag in buckets": s.HandlerLag.Buckets[slices.Max(slices.Collect(maps.Keys(s.HandlerLag.Buckets)))],
	}
	want := map[string]uint64{
		"informers Synced": 1, "informers Forbidden": 0, "running": 1, "owners": 1, "cached": 1,
		"received Added": 1, "delivered InitialList": 1, "delivered Added": 1,
		"sync duration count": 1, "handler lag count": 1, "handler lag in buckets": 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	if _, ok := s.Informers[watchregistry.StateGone]; !ok {
		t.Errorf("Informers lacks the states without informers: %v", s.Informers)
	}
}

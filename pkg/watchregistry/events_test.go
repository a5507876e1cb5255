// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"

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

func TestGetAndListReadTheCache(t *testing.T) {
	c, ns, r, rec, ref := watched(t, watchregistry.Options[string]{})
	for i, owner := range []string{"a", "b", "a"} {
		createConfigMap(t, c.cs, configMap(ns, fmt.Sprintf("cm-%d", i), owner, nil))
	}
	// Not managed: outside the label selector, never cached.
	plain := configMap(ns, "plain", "a", nil)
	delete(plain.Labels, managedBy)
	createConfigMap(t, c.cs, plain)
	createConfigMap(t, c.cs, configMap(ns, "last", "a", nil))
	rec.waitAfter(t, 0, "the last add", isEvent(watchregistry.EventAdded, "last"))

	got, err := r.Get(ref, ns, "cm-1")
	if err != nil || got.GetLabels()[ownerLabel] != "b" {
		t.Fatalf("Get cm-1: %v, %v", got, err)
	}
	if _, err := r.Get(ref, ns, "plain"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of an object outside the selector: %v, want NotFound", err)
	}
	if _, err := r.Get(ref, "elsewhere", "cm-1"); err == nil {
		t.Fatal("Get outside the ref's namespace succeeded")
	}
	untracked := watchregistry.Ref{GVR: secrets, Namespace: ns}
	if _, err := r.Get(untracked, ns, "x"); !errors.Is(err, watchregistry.ErrNotTracked) {
		t.Fatalf("Get of an untracked ref: %v, want ErrNotTracked", err)
	}
	// Has: present, present with labels that match, and not.
	ownedByB := labels.SelectorFromSet(labels.Set{ownerLabel: "b"})
	for _, c := range []struct {
		name string
		sel  labels.Selector
		want bool
	}{{"cm-1", nil, true}, {"cm-1", ownedByB, true}, {"cm-0", ownedByB, false}, {"plain", nil, false}, {"absent", nil, false}} {
		if got, err := r.Has(ref, ns, c.name, c.sel); err != nil || got != c.want {
			t.Errorf("Has %s (selector %v): %v, %v; want %v", c.name, c.sel, got, err, c.want)
		}
	}
	if _, err := r.Has(untracked, ns, "x", nil); !errors.Is(err, watchregistry.ErrNotTracked) {
		t.Fatalf("Has of an untracked ref: %v, want ErrNotTracked", err)
	}

	sel := labels.SelectorFromSet(labels.Set{ownerLabel: "a"})
	list, err := r.List(ref, ns, sel)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cm-0", "cm-2", "last"}, names(list)); diff != "" {
		t.Fatalf("List owner=a (-want +got):\n%s", diff)
	}
	typed, err := watchregistry.GetTyped[corev1.ConfigMap](r, ref, ns, "cm-1")
	if err != nil || typed.Labels[ownerLabel] != "b" || typed.ResourceVersion == "" {
		t.Fatalf("GetTyped cm-1: %+v, %v", typed, err)
	}
	if _, err := watchregistry.GetTyped[corev1.ConfigMap](r, ref, ns, "plain"); !apierrors.IsNotFound(err) {
		t.Fatalf("GetTyped of an object outside the selector: %v, want NotFound", err)
	}
	typedList, err := watchregistry.ListTyped[corev1.ConfigMap](r, ref, ns, sel)
	if err != nil || len(typedList) != 3 || typedList[2].Name != "last" {
		t.Fatalf("ListTyped owner=a: %v, %v", typedList, err)
	}

	// An all-namespaces ref lists by namespace through its index.
	all := watchregistry.Ref{GVR: configMaps}
	track(t, r, "cluster-wide", all)
	waitState(t, r, all, watchregistry.StateSynced)
	list, err = r.List(all, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"cm-0", "cm-1", "cm-2", "last"}, names(list)); diff != "" {
		t.Fatalf("List of namespace %s through an all-namespaces ref (-want +got):\n%s", ns, diff)
	}
	if _, err := r.Get(all, ns, "cm-0"); err != nil {
		t.Fatalf("Get through an all-namespaces ref: %v", err)
	}

	// Cluster-scoped resources use an all-namespaces ref and no namespace.
	nsRef := watchregistry.Ref{GVR: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}}
	r2 := startRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue, LabelSelector: "kubernetes.io/metadata.name=" + ns})
	track(t, r2, "owner", nsRef)
	waitState(t, r2, nsRef, watchregistry.StateSynced)
	if _, err := r2.Get(nsRef, "", ns); err != nil {
		t.Fatalf("Get of a cluster-scoped object: %v", err)
	}
}

// TestReadsReturnTheObjectAsServedAfterTheTransform reads back, in every
// caching mode, an object with everything the cache stores apart (status,
// resourceVersion, generation, managedFields) and JSON values of every kind,
// and checks that callers own what they read.
func TestReadsReturnTheObjectAsServedAfterTheTransform(t *testing.T) {
	admin := newClients(t, controlPlane(t))
	const kind = "Thingamajig"
	gvr := crd(t, admin, "roundtrip.watchregistry.test", kind, true)
	kindFor := func(schema.GroupVersionResource) (schema.GroupVersionKind, error) {
		return gvr.GroupVersion().WithKind(kind), nil
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		opts      watchregistry.Options[string]
		transform watchregistry.TransformFunc
		// managedFields says whether the cached object keeps some.
		managedFields bool
	}{
		{"default transform", watchregistry.Options[string]{}, watchregistry.DropManagedFields, false},
		{"keep some managedFields", watchregistry.Options[string]{Transform: watchregistry.KeepManagedFieldsOf("status-writer")},
			watchregistry.KeepManagedFieldsOf("status-writer"), true},
		{"no transform", watchregistry.Options[string]{Transform: watchregistry.AsServed}, nil, true},
		{"metadata-only", watchregistry.Options[string]{MetadataOnly: true, KindFor: kindFor, Transform: watchregistry.KeepManagedFieldsOf("status-writer")},
			watchregistry.KeepManagedFieldsOf("status-writer"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t, admin.cs)
			client := admin.dyn.Resource(gvr).Namespace(ns)
			cr := customResource(gvr, kind, ns, "cr", "owner")
			cr.SetAnnotations(map[string]string{watchregistry.LastAppliedAnnotation: `{"kept":"unless transformed"}`, "html": "<a & b>"})
			cr.Object["spec"] = map[string]any{
				"int": int64(9007199254740993), "negative": int64(-1), "float": 0.5, "big": 1e21,
				"bool": true, "null": nil, "empty": map[string]any{}, "none": []any{},
				"nested": []any{map[string]any{"k": []any{int64(1), 2.5, "s", false}}}, "unicode": "é\u2028",
			}
			created, err := client.Create(ctx, cr, metav1.CreateOptions{FieldManager: "watchregistry-test"})
			if err != nil {
				t.Fatal(err)
			}
			created.Object["status"] = map[string]any{"phase": "Ready", "observedGeneration": int64(1), "ratio": 0.25}
			if _, err := client.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: "status-writer"}); err != nil {
				t.Fatal(err)
			}
			// Read after the writes, and the registry started after them: its
			// initial list holds this very version.
			served, err := client.Get(ctx, "cr", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.opts.MetadataOnly {
				pom, err := admin.md.Resource(gvr).Namespace(ns).Get(ctx, "cr", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				md, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pom.ObjectMeta)
				if err != nil {
					t.Fatal(err)
				}
				served = &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind, "metadata": md}}
			}
			want := served.DeepCopy()
			if tc.transform != nil {
				if err := tc.transform(want); err != nil {
					t.Fatal(err)
				}
			}
			// Everything the cache keeps apart is there to be put back.
			if want.GetResourceVersion() == "" || want.GetGeneration() == 0 || (len(want.GetManagedFields()) > 0) != tc.managedFields {
				t.Fatalf("served object lacks what the test needs: %v", want.Object)
			}
			if _, ok := want.Object["status"]; ok == tc.opts.MetadataOnly {
				t.Fatalf("served object has status: %v, want %v", ok, !tc.opts.MetadataOnly)
			}

			tc.opts.Enqueue = (&recorder{}).enqueue
			r := startRegistry(t, admin, tc.opts)
			ref := watchregistry.Ref{GVR: gvr, Namespace: ns}
			track(t, r, "owner", ref)
			waitState(t, r, ref, watchregistry.StateSynced)

			got, err := r.Get(ref, ns, "cr")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.Object, got.Object); diff != "" {
				t.Fatalf("Get (-want +got):\n%s", diff)
			}
			list, err := r.List(ref, "", labels.SelectorFromSet(labels.Set{ownerLabel: "owner"}))
			if err != nil || len(list) != 1 {
				t.Fatalf("List: %v, %v", list, err)
			}
			if diff := cmp.Diff(want.Object, list[0].Object); diff != "" {
				t.Fatalf("List (-want +got):\n%s", diff)
			}

			// What Get and List return is the caller's own.
			for _, u := range []*unstructured.Unstructured{got, list[0]} {
				u.SetLabels(map[string]string{"mutated": "yes"})
				u.SetResourceVersion("1")
				_ = unstructured.SetNestedField(u.Object, "mutated", "status", "phase")
				_ = unstructured.SetNestedField(u.Object, "mutated", "spec", "unicode")
				u.SetManagedFields(nil)
			}
			again, err := r.Get(ref, ns, "cr")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.Object, again.Object); diff != "" {
				t.Fatalf("Get after mutating earlier results (-want +got):\n%s", diff)
			}
		})
	}
}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}

func TestTransformDropsManagedFieldsAndLastApplied(t *testing.T) {
	const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"
	for _, tc := range []struct {
		name          string
		opts          watchregistry.Options[string]
		wantManagers  []string
		wantAnnotated bool
	}{
		{"default", watchregistry.Options[string]{}, nil, false},
		{"keep kubectl's", watchregistry.Options[string]{Transform: watchregistry.KeepManagedFieldsOf("kubectl-edit")}, []string{"kubectl-edit"}, false},
		{"none", watchregistry.Options[string]{Transform: watchregistry.AsServed}, []string{"kubectl-edit", "watchregistry-test"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ns, r, rec, ref := watched(t, tc.opts)
			cm := configMap(ns, "applied", "owner", map[string]string{"k": "v"})
			cm.Annotations = map[string]string{lastApplied: `{"big":"copy"}`, "keep": "me"}
			if _, err := c.cs.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{FieldManager: "watchregistry-test"}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.cs.CoreV1().ConfigMaps(ns).Patch(context.Background(), "applied", types.MergePatchType,
				[]byte(`{"data":{"edited":"yes"}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
				t.Fatal(err)
			}
			rec.waitAfter(t, 0, "the edit", isEvent(watchregistry.EventUpdated, "applied"))
			got, err := r.Get(ref, ns, "applied")
			if err != nil {
				t.Fatal(err)
			}
			var managers []string
			for _, e := range got.GetManagedFields() {
				managers = append(managers, e.Manager)
			}
			// The API server's order of managedFields entries is not what
			// this test is about, and is not always the order of writes.
			slices.Sort(managers)
			if diff := cmp.Diff(tc.wantManagers, managers); diff != "" {
				t.Errorf("managedFields managers (-want +got):\n%s", diff)
			}
			if _, ok := got.GetAnnotations()[lastApplied]; ok != tc.wantAnnotated {
				t.Errorf("last-applied annotation present: %v, want %v", ok, tc.wantAnnotated)
			}
			if got.GetAnnotations()["keep"] != "me" {
				t.Errorf("other annotations lost: %v", got.GetAnnotations())
			}
		})
	}
}

func TestMetadataOnlyCachesApiVersionKindAndMetadata(t *testing.T) {
	kindFor := func(gvr schema.GroupVersionResource) (schema.GroupVersionKind, error) {
		if gvr == configMaps {
			return gvr.GroupVersion().WithKind("ConfigMap"), nil
		}
		return schema.GroupVersionKind{}, fmt.Errorf("no kind for %s", gvr)
	}
	c, ns, r, rec, ref := watched(t, watchregistry.Options[string]{MetadataOnly: true, KindFor: kindFor})
	createConfigMap(t, c.cs, configMap(ns, "meta", "owner", map[string]string{"k": "v"}))
	got := rec.waitAfter(t, 0, "the add", isEvent(watchregistry.EventAdded, "meta"))
	if got.ev.Object.GetAPIVersion() != "v1" || got.ev.Object.GetKind() != "ConfigMap" {
		t.Fatalf("metadata-only object is %s %s, want v1 ConfigMap", got.ev.Object.GetAPIVersion(), got.ev.Object.GetKind())
	}
	if _, ok := got.ev.Object.Object["data"]; ok {
		t.Fatalf("metadata-only object carries data: %v", got.ev.Object.Object)
	}
	cached, err := r.Get(ref, ns, "meta")
	if err != nil || cached.GetLabels()[ownerLabel] != "owner" || len(cached.GetManagedFields()) != 0 {
		t.Fatalf("Get: %v, %v", cached, err)
	}

	// A data change is invisible in metadata but still delivered: a
	// ConfigMap has no generation to tell it from a status write.
	pos := rec.mark()
	changed := patchConfigMap(t, c.cs, ns, "meta", `{"data":{"k":"v2"}}`)
	got = rec.waitAfter(t, pos, "the data change", forObject("meta"))
	if got.ev.Type != watchregistry.EventUpdated || got.ev.Object.GetResourceVersion() != changed.ResourceVersion {
		t.Fatalf("first event after the data change: %s", got)
	}
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

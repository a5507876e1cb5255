// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

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

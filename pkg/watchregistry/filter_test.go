// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/json"
)

func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// packJSON packs an object given as JSON, as the informers' transform does.
func packJSON(t *testing.T, s string) *packed {
	t.Helper()
	p, err := pack(&unstructured.Unstructured{Object: obj(t, s)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOnlyStatusChanged(t *testing.T) {
	const base = `{"apiVersion":"v1","kind":"X","metadata":{"name":"a","resourceVersion":"1","generation":1,"labels":{"l":"1"},"annotations":{"a":"1"},"managedFields":[{"manager":"m"}]},"spec":{"n":1},"status":{"phase":"A"}}`
	for _, tc := range []struct {
		name             string
		new              string
		ignoreGeneration bool
		want             bool
	}{
		{"status changed", `{"apiVersion":"v1","kind":"X","metadata":{"name":"a","resourceVersion":"2","generation":1,"labels":{"l":"1"},"annotations":{"a":"1"},"managedFields":[{"manager":"m"},{"manager":"s"}]},"spec":{"n":1},"status":{"phase":"B"}}`, true, true},
		{"status and generation without subresource", `{"apiVersion":"v1","kind":"X","metadata":{"name":"a","resourceVersion":"2","generation":2,"labels":{"l":"1"},"annotations":{"a":"1"},"managedFields":[{"manager":"m"}]},"spec":{"n":1},"status":{"phase":"B"}}`, true, true},
		{"generation counts for metadata-only objects", `{"apiVersion":"v1","kind":"X","metadata":{"name":"a","resourceVersion":"2","generation":2,"labels":{"l":"1"},"annotations":{"a":"1"},"managedFields":[{"manager":"m"}]},"spec":{"n":1},"status":{"phase":"A"}}`, false, false},
		{"status removed", `{"apiVersion":"v1","kind":"X","metadata":{"name":"a","resourceVersion":"2","generation":1,"labels":{"l":"1"},"annotations":{"a":"1"},"managedFields":[{"manager":"m"}]},"spec":{"n":1}}`, true, true},
		{"spec changed", `{"apiVersion":"v1","kind":"X","metadata":{"name":"a","resourceVersion":"2","generation":2,"labels":{"l":"1"},"annotations":{"a":"1"},"managedFields":[{"manager":"m"}]},"spec":{"n":2},"status":{"phase":"A"}}`, true, false},
		{"label changed", `{"apiVersion":"v1","kind":"X","metadata":{"name":"a","resourceVersion":"2","generation":1,"labels":{"l":"2"},"annotations":{"a":"1"},"managedFields":[{"manager":"m"}]},"spec":{"n":1},"status":{"phase":"A"}}`, true, false},
		{"label added", `{"apiVersion":"v1","kind":"X","metadata":{"name":"a","resourceVersion":"2","generation":1,"labels":{"l":"1","m":"1"},"annotations":{"a":"1"},"managedFields":[{"manager":"m"}]},"spec":{"n":1},"status":{"phase":"A"}}`, true, false},
		{"annotations removed", `{"apiVersion":"v1","kind":"X","metadata":{"name":"a","resourceVersion":"2","generation":1,"labels":{"l":"1"},"managedFields":[{"manager":"m"}]},"spec":{"n":1},"status":{"phase":"A"}}`, true, false},
		{"top-level field added (ConfigMap data)", `{"apiVersion":"v1","kind":"X","metadata":{"name":"a","resourceVersion":"2","generation":1,"labels":{"l":"1"},"annotations":{"a":"1"},"managedFields":[{"manager":"m"}]},"spec":{"n":1},"status":{"phase":"A"},"data":{"k":"v"}}`, true, false},
		{"top-level field removed", `{"apiVersion":"v1","kind":"X","metadata":{"name":"a","resourceVersion":"2","generation":1,"labels":{"l":"1"},"annotations":{"a":"1"},"managedFields":[{"manager":"m"}]},"status":{"phase":"A"}}`, true, false},
		{"finalizer added", `{"apiVersion":"v1","kind":"X","metadata":{"name":"a","resourceVersion":"2","generation":1,"labels":{"l":"1"},"annotations":{"a":"1"},"managedFields":[{"manager":"m"}],"finalizers":["f"]},"spec":{"n":1},"status":{"phase":"A"}}`, true, false},
		{"deletion started", `{"apiVersion":"v1","kind":"X","metadata":{"name":"a","resourceVersion":"2","generation":1,"labels":{"l":"1"},"annotations":{"a":"1"},"managedFields":[{"manager":"m"}],"deletionTimestamp":"2026-11-21T00:00:00Z"},"spec":{"n":1},"status":{"phase":"A"}}`, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := onlyStatusChanged(packJSON(t, base), packJSON(t, tc.new), tc.ignoreGeneration); got != tc.want {
				t.Fatalf("onlyStatusChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTransforms(t *testing.T) {
	const in = `{"metadata":{"name":"a","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","keep":"1"},"managedFields":[{"manager":"vidra"},{"manager":"kubectl-edit"},{"manager":"kube-controller-manager"}]},"data":{"k":"v"}}`
	const onlyLastApplied = `{"metadata":{"name":"a","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}}}`
	for _, tc := range []struct {
		name      string
		transform TransformFunc
		in, want  string
	}{
		{"drop", DropManagedFields, in, `{"metadata":{"name":"a","annotations":{"keep":"1"}},"data":{"k":"v"}}`},
		{"keep some", KeepManagedFieldsOf("kubectl-edit", "vidra"), in, `{"metadata":{"name":"a","annotations":{"keep":"1"},"managedFields":[{"manager":"vidra"},{"manager":"kubectl-edit"}]},"data":{"k":"v"}}`},
		{"keep none present", KeepManagedFieldsOf("kubectl"), in, `{"metadata":{"name":"a","annotations":{"keep":"1"}},"data":{"k":"v"}}`},
		{"empty annotations removed", DropManagedFields, onlyLastApplied, `{"metadata":{"name":"a"}}`},
		{"nothing to drop", DropManagedFields, `{"metadata":{"name":"a"}}`, `{"metadata":{"name":"a"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: obj(t, tc.in)}
			if err := tc.transform(u); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(obj(t, tc.want), u.Object); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			// Idempotent, as client-go requires of a transform.
			if err := tc.transform(u); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(obj(t, tc.want), u.Object); diff != "" {
				t.Fatalf("second run (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetadataToUnstructured(t *testing.T) {
	gv := schema.GroupVersion{Group: "apps", Version: "v1"}
	p := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", ResourceVersion: "7", Labels: map[string]string{"l": "1"}},
	}
	out, err := metadataToUnstructured(p, gv, func() string { return "Deployment" })
	if err != nil {
		t.Fatal(err)
	}
	u := out.(*unstructured.Unstructured)
	if u.GetAPIVersion() != "apps/v1" || u.GetKind() != "Deployment" || u.GetName() != "d" || u.GetNamespace() != "ns" ||
		u.GetResourceVersion() != "7" || u.GetLabels()["l"] != "1" {
		t.Fatalf("converted: %v", u.Object)
	}
	for k := range u.Object {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			t.Fatalf("unexpected field %q in %v", k, u.Object)
		}
	}
	// Already converted objects pass through.
	again, err := metadataToUnstructured(u, gv, func() string { return "Other" })
	if err != nil || again != any(u) {
		t.Fatalf("second conversion: %v, %v", again, err)
	}
	// Without a kind resolver the kind is left out.
	out, _ = metadataToUnstructured(p, gv, func() string { return "" })
	if _, ok := out.(*unstructured.Unstructured).Object["kind"]; ok {
		t.Fatal("kind set without a resolver")
	}
}

func TestExpectations(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	ttl := time.Minute
	cms := Ref{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	k := keyOf(cms, "ns", "a")
	other := keyOf(cms, "ns", "b")

	for _, tc := range []struct {
		name string
		run  func(x *expectations) []bool
		want []bool
	}{
		{"write matches its resourceVersion", func(x *expectations) []bool {
			x.expectWrite(k, "5", t0.Add(ttl))
			return []bool{x.matchWrite(k, "4", t0), x.matchWrite(other, "5", t0), x.matchWrite(k, "5", t0), x.len() == 0}
		}, []bool{false, false, true, true}},
		{"a matched write still matches for a second informer, briefly", func(x *expectations) []bool {
			x.expectWrite(k, "5", t0.Add(ttl))
			return []bool{x.matchWrite(k, "5", t0), x.matchWrite(k, "5", t0.Add(time.Second)), x.matchWrite(k, "5", t0.Add(matchedGrace+time.Second))}
		}, []bool{true, true, false}},
		{"the same object through a namespaced and an all-namespaces ref", func(x *expectations) []bool {
			x.expectWrite(keyOf(Ref{GVR: cms.GVR, Namespace: "ns"}, "ns", "a"), "5", t0.Add(ttl))
			return []bool{x.matchWrite(keyOf(cms, "ns", "a"), "5", t0), x.matchWrite(keyOf(Ref{Cluster: "east", GVR: cms.GVR}, "ns", "a"), "5", t0)}
		}, []bool{true, false}},
		{"two writes before their events", func(x *expectations) []bool {
			x.expectWrite(k, "5", t0.Add(ttl))
			x.expectWrite(k, "6", t0.Add(ttl))
			return []bool{x.matchWrite(k, "5", t0), x.matchWrite(k, "6", t0)}
		}, []bool{true, true}},
		{"expired write does not match", func(x *expectations) []bool {
			x.expectWrite(k, "5", t0.Add(ttl))
			return []bool{x.matchWrite(k, "5", t0.Add(ttl+time.Second))}
		}, []bool{false}},
		{"delete without a UID matches once", func(x *expectations) []bool {
			x.expectDelete(k, "", t0.Add(ttl))
			return []bool{x.matchDelete(other, "", t0), x.matchDelete(k, "u1", t0), x.matchDelete(k, "u2", t0)}
		}, []bool{false, true, false}},
		{"delete with a UID matches that object only", func(x *expectations) []bool {
			x.expectDelete(k, "u1", t0.Add(ttl))
			return []bool{x.matchDelete(k, "u2", t0), x.matchDelete(k, "u1", t0), x.matchDelete(k, "u1", t0.Add(time.Second)), x.len() == 0,
				x.matchDelete(k, "u1", t0.Add(matchedGrace+time.Second))}
		}, []bool{false, true, true, true, false}},
		{"a withdrawn delete does not match", func(x *expectations) []bool {
			x.expectDelete(k, "u1", t0.Add(ttl))
			seen := x.unexpectDelete(k, "u1")
			return []bool{seen, x.matchDelete(k, "u1", t0), x.len() == 0}
		}, []bool{false, false, true}},
		{"withdrawing another UID's delete leaves it", func(x *expectations) []bool {
			x.expectDelete(k, "u1", t0.Add(ttl))
			seen := x.unexpectDelete(k, "u2")
			return []bool{seen, x.matchDelete(k, "u1", t0)}
		}, []bool{false, true}},
		{"a matched delete is not withdrawn, and says it was seen", func(x *expectations) []bool {
			x.expectDelete(k, "u1", t0.Add(ttl))
			first := x.matchDelete(k, "u1", t0)
			seen := x.unexpectDelete(k, "u1")
			return []bool{first, seen, x.matchDelete(k, "u1", t0.Add(time.Second))}
		}, []bool{true, true, true}},
		{"expired delete does not match", func(x *expectations) []bool {
			x.expectDelete(k, "", t0.Add(ttl))
			return []bool{x.matchDelete(k, "", t0.Add(2*ttl))}
		}, []bool{false}},
		{"sweep drops only expired ones", func(x *expectations) []bool {
			x.expectWrite(k, "5", t0.Add(ttl))
			x.expectWrite(other, "9", t0.Add(3*ttl))
			x.expectDelete(k, "", t0.Add(ttl))
			x.sweep(t0.Add(2 * ttl))
			return []bool{x.len() == 1, x.matchWrite(other, "9", t0.Add(2*ttl)), x.len() == 0}
		}, []bool{true, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.run(&expectations{})); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteHolds(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	hold := 10 * time.Second
	cms := Ref{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	k := keyOf(cms, "ns", "a")
	other := keyOf(cms, "ns", "b")

	// Each case returns what happened, in order: "held x" or "passed x" for
	// each event offered, "ran x" for each released event handled.
	for _, tc := range []struct {
		name string
		run  func(x *expectations, offer func(objectKey, string), run func([]func()), log *[]string)
		want []string
	}{
		{"events of an object wait for its write in flight, in order", func(x *expectations, offer func(objectKey, string), run func([]func()), log *[]string) {
			id := x.beginWrite(k, t0.Add(hold))
			offer(k, "1")
			offer(other, "2")
			offer(k, "3")
			run(x.endWrite(k, id))
			offer(k, "4")
		}, []string{"held 1", "passed 2", "held 3", "ran 1", "ran 3", "passed 4"}},
		{"a write that ends before its event holds nothing", func(x *expectations, offer func(objectKey, string), run func([]func()), log *[]string) {
			run(x.endWrite(k, x.beginWrite(k, t0.Add(hold))))
			offer(k, "1")
		}, []string{"passed 1"}},
		{"two writes in flight release once both ended", func(x *expectations, offer func(objectKey, string), run func([]func()), log *[]string) {
			a, b := x.beginWrite(k, t0.Add(hold)), x.beginWrite(k, t0.Add(hold))
			offer(k, "1")
			run(x.endWrite(k, a))
			*log = append(*log, "a ended")
			run(x.endWrite(k, b))
		}, []string{"held 1", "a ended", "ran 1"}},
		{"a write ended twice releases once", func(x *expectations, offer func(objectKey, string), run func([]func()), log *[]string) {
			id := x.beginWrite(k, t0.Add(hold))
			offer(k, "1")
			run(x.endWrite(k, id))
			run(x.endWrite(k, id))
		}, []string{"held 1", "ran 1"}},
		{"a hold never outlasts its deadline", func(x *expectations, offer func(objectKey, string), run func([]func()), log *[]string) {
			id := x.beginWrite(k, t0.Add(hold))
			offer(k, "1")
			released, next := x.releaseExpired(t0.Add(hold / 2))
			run(released)
			*log = append(*log, "next "+next.Sub(t0).String())
			released, next = x.releaseExpired(t0.Add(hold + time.Second))
			run(released)
			*log = append(*log, fmt.Sprintf("next zero %v", next.IsZero()))
			// The late answer releases nothing more, and holds nothing.
			run(x.endWrite(k, id))
			offer(k, "2")
		}, []string{"held 1", "next 10s", "ran 1", "next zero true", "passed 2"}},
		{"the sweep ends writes never ended", func(x *expectations, offer func(objectKey, string), run func([]func()), log *[]string) {
			x.beginWrite(k, t0.Add(hold))
			offer(k, "1")
			run(x.sweep(t0.Add(2 * hold)))
			w, e := x.inflightAndHeld()
			*log = append(*log, fmt.Sprintf("in flight %d, held %d, objects %d", w, e, len(x.m)))
		}, []string{"held 1", "ran 1", "in flight 0, held 0, objects 0"}},
		{"an expected delete does not end a write in flight", func(x *expectations, offer func(objectKey, string), run func([]func()), log *[]string) {
			id := x.beginWrite(k, t0.Add(hold))
			x.expectDelete(k, "u1", t0.Add(time.Minute))
			x.matchDelete(k, "u1", t0)
			offer(k, "1")
			run(x.endWrite(k, id))
		}, []string{"held 1", "ran 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := &expectations{}
			var log []string
			offer := func(k objectKey, ev string) {
				if x.hold(k, func() { log = append(log, "ran "+ev) }) {
					log = append(log, "held "+ev)
				} else {
					log = append(log, "passed "+ev)
				}
			}
			run := func(fns []func()) {
				for _, fn := range fns {
					fn()
				}
			}
			tc.run(x, offer, run, &log)
			if diff := cmp.Diff(tc.want, log); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestHeldOwnWriteMatchesOnceAnswered is the race BeginWrite exists for:
// the event of a write comes before its answer, and its expectation.
func TestHeldOwnWriteMatchesOnceAnswered(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	cms := Ref{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	k := keyOf(cms, "ns", "a")
	x := &expectations{}
	var own []bool
	handle := func(rv string) func() {
		return func() { own = append(own, x.matchWrite(k, rv, t0)) }
	}
	id := x.beginWrite(k, t0.Add(10*time.Second))
	for _, rv := range []string{"5", "6", "7"} { // someone's, the write's, someone's
		if !x.hold(k, handle(rv)) {
			t.Fatalf("event at %s not held", rv)
		}
	}
	x.expectWrite(k, "6", t0.Add(time.Minute))
	for _, fn := range x.endWrite(k, id) {
		fn()
	}
	if diff := cmp.Diff([]bool{false, true, false}, own); diff != "" {
		t.Fatalf("own write by event (-want +got):\n%s", diff)
	}
}

func TestStateErrorMatchesItsSentinelAndTheAPIError(t *testing.T) {
	ref := Ref{Cluster: "east", GVR: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Namespace: "ns"}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "", errors.New("no"))
	err := error(&StateError{Ref: ref, State: StateForbidden, Err: forbidden})
	if !errors.Is(err, ErrForbidden) || errors.Is(err, ErrGone) || !apierrors.IsForbidden(err) {
		t.Fatalf("%v: wrong matches", err)
	}
	if want := "watch deployments.v1.apps in namespace ns of cluster east: list or watch is forbidden: " + forbidden.Error(); err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
	stopped := &StateError{Ref: Ref{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}, State: StateStopped}
	if !errors.Is(stopped, ErrStopped) || stopped.Error() != "watch configmaps.v1 in all namespaces of the local cluster: informer stopped" {
		t.Fatalf("%v", stopped)
	}
}

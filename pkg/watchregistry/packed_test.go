// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/tools/cache"
)

func TestPackIsLossless(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want metav1.ObjectMeta // the typed part
	}{
		{"full object", `{"apiVersion":"example.com/v1","kind":"X","metadata":{"name":"a","namespace":"ns","uid":"u-1","resourceVersion":"42","generation":3,` +
			`"labels":{"l":"1","m":""},"annotations":{"a":"<b & c>"},"finalizers":["f"],"managedFields":[{"manager":"m","operation":"Apply","fieldsV1":{"f:data":{}}}],` +
			`"creationTimestamp":"2026-11-21T00:00:00Z"},"spec":{"int":9007199254740993,"neg":-1,"float":0.5,"big":1e+21,"null":null,"empty":{},"list":[],` +
			`"nested":[{"k":[1,2.5,"s",true,null]}],"unicode":"é\u2028"},"status":{"phase":"Ready","observedGeneration":3}}`,
			metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "u-1", ResourceVersion: "42", Generation: 3, Labels: map[string]string{"l": "1", "m": ""}}},
		{"no metadata", `{"apiVersion":"v1","kind":"X"}`, metav1.ObjectMeta{}},
		{"empty metadata and null status", `{"metadata":{},"status":null}`, metav1.ObjectMeta{}},
		{"resourceVersion only", `{"metadata":{"resourceVersion":"7"}}`, metav1.ObjectMeta{ResourceVersion: "7"}},
		{"empty managedFields and labels", `{"metadata":{"name":"a","managedFields":[],"labels":{}}}`, metav1.ObjectMeta{Name: "a"}},
		// Not what an API server sends, but a transform might: kept in body.
		{"odd generation and resourceVersion", `{"metadata":{"name":"a","generation":1.5,"resourceVersion":7}}`, metav1.ObjectMeta{Name: "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := packJSON(t, tc.in)
			if diff := cmp.Diff(tc.want, p.ObjectMeta); diff != "" {
				t.Errorf("typed metadata (-want +got):\n%s", diff)
			}
			u, err := p.unpack()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(obj(t, tc.in), u.Object); diff != "" {
				t.Fatalf("unpacked (-want +got):\n%s", diff)
			}
			// Each unpack is a fresh object.
			u.SetLabels(map[string]string{"changed": "1"})
			again, err := p.unpack()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(obj(t, tc.in), again.Object); diff != "" {
				t.Fatalf("second unpack after mutating the first (-want +got):\n%s", diff)
			}
			c := p.DeepCopyObject().(*packed)
			if diff := cmp.Diff(p, c, cmp.AllowUnexported(packed{})); diff != "" {
				t.Fatalf("deep copy (-orig +copy):\n%s", diff)
			}
		})
	}
}

func TestTransformPacksOnceAndPassesPackedObjectsThrough(t *testing.T) {
	ref := Ref{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "ns"}
	for _, tc := range []struct {
		name string
		opts Options[string]
		in   func() any
		want string
	}{
		{"default transform", Options[string]{},
			func() any {
				return &unstructured.Unstructured{Object: obj(t, `{"metadata":{"name":"a","namespace":"ns","managedFields":[{"manager":"m"}]},"data":{"k":"v"}}`)}
			},
			`{"metadata":{"name":"a","namespace":"ns"},"data":{"k":"v"}}`},
		{"no transform", Options[string]{Transform: AsServed},
			func() any {
				return &unstructured.Unstructured{Object: obj(t, `{"metadata":{"name":"a","namespace":"ns","managedFields":[{"manager":"m"}]},"data":{"k":"v"}}`)}
			},
			`{"metadata":{"name":"a","namespace":"ns","managedFields":[{"manager":"m"}]},"data":{"k":"v"}}`},
		{"metadata-only", Options[string]{MetadataOnly: true},
			func() any {
				return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: types.UID("u"), ResourceVersion: "5", Generation: 2}}
			},
			`{"apiVersion":"v1","metadata":{"name":"a","namespace":"ns","uid":"u","resourceVersion":"5","generation":2}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Map = func(Event) []string { return nil }
			tc.opts.Enqueue = func(string, Event) {}
			r, err := New(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			transform := r.transformFor(&entry[string]{ref: ref, log: logr.Discard()})
			out, err := transform(tc.in())
			if err != nil {
				t.Fatal(err)
			}
			p := out.(*packed)
			u, err := p.unpack()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(obj(t, tc.want), u.Object); diff != "" {
				t.Fatalf("cached object (-want +got):\n%s", diff)
			}
			// The watch-list path transforms its objects a second time.
			again, err := transform(p)
			if err != nil || again != any(p) {
				t.Fatalf("second transform: %v, %v; want the packed object unchanged", again, err)
			}
		})
	}
}

func TestDeleteOfATombstoneDeliversTheLastKnownObject(t *testing.T) {
	ref := Ref{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "ns"}
	var got []Event
	r, err := New(Options[string]{
		Map:     func(ev Event) []string { return []string{ev.Object.GetLabels()["owner"]} },
		Enqueue: func(_ string, ev Event) { got = append(got, ev) },
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &handler[string]{r: r, e: &entry[string]{ref: ref, log: logr.Discard()}, p: &part[string]{}}
	const last = `{"metadata":{"name":"a","namespace":"ns","resourceVersion":"9","labels":{"owner":"o"}},"data":{"k":"v"}}`
	// A tombstone holds what the cache held: a packed object.
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: packJSON(t, last)})
	if len(got) != 1 || got[0].Type != EventDeleted {
		t.Fatalf("delivered %v, want one delete", got)
	}
	if diff := cmp.Diff(obj(t, last), got[0].Object.Object); diff != "" {
		t.Fatalf("deleted object (-want +got):\n%s", diff)
	}
}

// servedDeployment is a Deployment as the API server returns it, defaults and
// status included.
const servedDeployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{"deployment.kubernetes.io/revision":"1","example.com/owner":"team-a/app"},` +
	`"creationTimestamp":"2026-11-21T00:00:00Z","generation":1,"labels":{"app.kubernetes.io/managed-by":"my-operator","example.com/owner-uid":"0b5c6f4e-8a51-4a5e-9a57-7c1c9d1b2f3a"},` +
	`"name":"app","namespace":"team-a","resourceVersion":"123456","uid":"1b5c6f4e-8a51-4a5e-9a57-7c1c9d1b2f3a"},"spec":{"progressDeadlineSeconds":600,"replicas":0,` +
	`"revisionHistoryLimit":10,"selector":{"matchLabels":{"app":"app"}},"strategy":{"rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"},"type":"RollingUpdate"},` +
	`"template":{"metadata":{"labels":{"app":"app"}},"spec":{"containers":[{"image":"registry.k8s.io/pause:3.10","imagePullPolicy":"IfNotPresent","name":"app",` +
	`"ports":[{"containerPort":8080,"protocol":"TCP"}],"resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],` +
	`"dnsPolicy":"ClusterFirst","restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"terminationGracePeriodSeconds":30}}},` +
	`"status":{"conditions":[{"lastTransitionTime":"2026-11-21T00:00:00Z","lastUpdateTime":"2026-11-21T00:00:00Z","message":"ReplicaSet \"app-5d8c\" has successfully progressed.",` +
	`"reason":"NewReplicaSetAvailable","status":"True","type":"Progressing"}],"observedGeneration":1}}`

// BenchmarkPackedDeployment measures the CPU the compact cache costs: pack
// runs once per object the watch delivers, unpack once per read and per
// delivered event.
func BenchmarkPackedDeployment(b *testing.B) {
	decode := func() *unstructured.Unstructured {
		var m map[string]any
		if err := json.Unmarshal([]byte(servedDeployment), &m); err != nil {
			b.Fatal(err)
		}
		return &unstructured.Unstructured{Object: m}
	}
	b.Run("pack", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			u := decode()
			b.StartTimer()
			if _, err := pack(u); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unpack", func(b *testing.B) {
		b.ReportAllocs()
		p, err := pack(decode())
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := p.unpack(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestDecodeIntoATypedObjectEqualsTheConvertedUnstructured(t *testing.T) {
	p := packJSON(t, servedDeployment)
	u, err := p.unpack()
	if err != nil {
		t.Fatal(err)
	}
	var want appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &want); err != nil {
		t.Fatal(err)
	}
	// into is overwritten, not merged into.
	got := appsv1.Deployment{Spec: appsv1.DeploymentSpec{MinReadySeconds: 7}, ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"stale": "1"}}}
	if err := p.decodeInto(&got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("typed decode (-want +got):\n%s", diff)
	}
	if got.ResourceVersion != "123456" || got.Generation != 1 || got.Status.ObservedGeneration != 1 || got.Kind != "Deployment" {
		t.Fatalf("parts kept apart not restored: %+v", got)
	}
	var again unstructured.Unstructured
	if err := p.decodeInto(&again); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(u.Object, again.Object); diff != "" {
		t.Fatalf("decode into Unstructured (-want +got):\n%s", diff)
	}
	if err := p.decodeInto((*appsv1.Deployment)(nil)); err == nil {
		t.Fatal("decode into a nil pointer succeeded")
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/json"
)

// phaseDigest digests status.phase: the condition the tests' owners wait on.
func phaseDigest(u *unstructured.Unstructured) uint64 {
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	h := fnv.New64a()
	h.Write([]byte(phase))
	return h.Sum64()
}

func TestWakeDigestSeesTheObjectAsServed(t *testing.T) {
	ref := Ref{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, Namespace: "ns"}
	var seen []string
	r, err := New(Options[string]{
		Map:     func(Event) []string { return nil },
		Enqueue: func(string, Event) {},
		Keep:    func(u *unstructured.Unstructured) bool { return u.GetName() != "rejected" },
		WakeDigest: func(u *unstructured.Unstructured) uint64 {
			// The default transform drops managedFields: seeing them proves
			// the digest runs first.
			seen = append(seen, u.GetName()+" managedFields="+strings.Repeat("1", len(u.GetManagedFields())))
			return phaseDigest(u)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	transform := r.transformFor(&entry[string]{ref: ref, log: logr.Discard()})

	out, err := transform(&unstructured.Unstructured{Object: obj(t, `{"metadata":{"name":"a","namespace":"ns","managedFields":[{"manager":"m"}]},"status":{"phase":"Ready"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	p := out.(*packed)
	if want := phaseDigest(&unstructured.Unstructured{Object: obj(t, `{"status":{"phase":"Ready"}}`)}); p.digest != want {
		t.Fatalf("digest %d, want %d", p.digest, want)
	}
	if p.managedFields != nil {
		t.Fatal("managedFields cached: the transform did not run after the digest")
	}
	if c := p.DeepCopyObject().(*packed); c.digest != p.digest {
		t.Fatalf("copy has digest %d, want %d", c.digest, p.digest)
	}
	// The watch-list path hands packed objects back: no second digest.
	if _, err := transform(p); err != nil {
		t.Fatal(err)
	}

	out, err = transform(&unstructured.Unstructured{Object: obj(t, `{"metadata":{"name":"rejected","namespace":"ns"},"status":{"phase":"Ready"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if stub := out.(*packed); !stub.rejected || stub.digest != 0 {
		t.Fatalf("rejected stub: rejected=%v digest=%d, want a stub without a digest", stub.rejected, stub.digest)
	}
	if diff := cmp.Diff([]string{"a managedFields=1"}, seen); diff != "" {
		t.Fatalf("digested objects (-want +got):\n%s", diff)
	}
}

func TestWakeDigestExcludesMetadataOnlyAndDeliverStatusOnly(t *testing.T) {
	for _, opts := range []Options[string]{
		{WakeDigest: phaseDigest, MetadataOnly: true},
		{WakeDigest: phaseDigest, DeliverStatusOnly: true},
	} {
		opts.Map = func(Event) []string { return nil }
		opts.Enqueue = func(string, Event) {}
		if _, err := New(opts); err == nil {
			t.Errorf("New(MetadataOnly=%v, DeliverStatusOnly=%v) with a WakeDigest succeeded", opts.MetadataOnly, opts.DeliverStatusOnly)
		}
	}
}

// TestUpdatesAndTheWakeDigest drives the handler with cached versions of one
// object, as the informer would, and checks what each update wakes.
func TestUpdatesAndTheWakeDigest(t *testing.T) {
	const (
		pending = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","namespace":"ns","resourceVersion":"1","generation":1,"labels":{"owner":"o"}},"spec":{"n":1},"status":{"phase":"Pending","heartbeat":"1"}}`
		// heartbeat is status churn: the digest does not read it.
		heartbeat = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","namespace":"ns","resourceVersion":"2","generation":1,"labels":{"owner":"o"}},"spec":{"n":1},"status":{"phase":"Pending","heartbeat":"2"}}`
		ready     = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","namespace":"ns","resourceVersion":"2","generation":1,"labels":{"owner":"o"}},"spec":{"n":1},"status":{"phase":"Ready","heartbeat":"1"}}`
		resynced  = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","namespace":"ns","resourceVersion":"1","generation":1,"labels":{"owner":"o"}},"spec":{"n":1},"status":{"phase":"Ready","heartbeat":"1"}}`
		specEdit  = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","namespace":"ns","resourceVersion":"2","generation":2,"labels":{"owner":"o"}},"spec":{"n":2},"status":{"phase":"Pending","heartbeat":"1"}}`
		bothEdits = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","namespace":"ns","resourceVersion":"2","generation":2,"labels":{"owner":"o"}},"spec":{"n":2},"status":{"phase":"Ready","heartbeat":"1"}}`
	)
	ref := Ref{GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, Namespace: "ns"}
	for _, tc := range []struct {
		name     string
		digest   func(*unstructured.Unstructured) uint64
		old, new string
		// ownWrite announces the new version with ExpectWrite.
		ownWrite bool
		want     EventType // "" when nothing is delivered
		filtered FilterReason
	}{
		{"status churn keeps the digest", phaseDigest, pending, heartbeat, false, "", FilterStatusOnly},
		{"status change moves the digest", phaseDigest, pending, ready, false, EventDigestChanged, ""},
		{"spec change keeps the digest", phaseDigest, pending, specEdit, false, EventUpdated, ""},
		{"spec and digest change", phaseDigest, pending, bothEdits, false, EventUpdated, ""},
		{"own write moving the digest", phaseDigest, pending, ready, true, "", FilterOwnWrite},
		{"resync", phaseDigest, pending, resynced, false, "", FilterResync},
		{"no digest: status change", nil, pending, ready, false, "", FilterStatusOnly},
		{"no digest: spec change", nil, pending, specEdit, false, EventUpdated, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []Event
			r, err := New(Options[string]{
				Map:        func(ev Event) []string { return []string{ev.Object.GetLabels()["owner"]} },
				Enqueue:    func(_ string, ev Event) { got = append(got, ev) },
				WakeDigest: tc.digest,
			})
			if err != nil {
				t.Fatal(err)
			}
			transform := r.transformFor(&entry[string]{ref: ref, log: logr.Discard()})
			cached := func(s string) *packed {
				out, err := transform(&unstructured.Unstructured{Object: obj(t, s)})
				if err != nil {
					t.Fatal(err)
				}
				return out.(*packed)
			}
			o, n := cached(tc.old), cached(tc.new)
			if tc.ownWrite {
				r.exp.expectWrite(keyOf(ref, "ns", "a"), n.ResourceVersion, time.Now().Add(time.Minute))
			}
			h := &handler[string]{r: r, e: &entry[string]{ref: ref, log: logr.Discard()}, p: &part[string]{}}
			h.OnUpdate(o, n)

			s := r.Stats()
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("delivered %v, want nothing", got)
				}
				if s.Filtered[tc.filtered] != 1 {
					t.Fatalf("filtered %v, want one %s", s.Filtered, tc.filtered)
				}
				return
			}
			if len(got) != 1 || got[0].Type != tc.want {
				t.Fatalf("delivered %v, want one %s", got, tc.want)
			}
			if got[0].Old.GetResourceVersion() != "1" || got[0].Object.GetResourceVersion() != "2" {
				t.Fatalf("delivered versions %s -> %s, want 1 -> 2", got[0].Old.GetResourceVersion(), got[0].Object.GetResourceVersion())
			}
			if s.DeliveredByType[tc.want] != 1 || s.Delivered != 1 {
				t.Fatalf("delivered %v (total %d), want one %s", s.DeliveredByType, s.Delivered, tc.want)
			}
		})
	}
}

// BenchmarkWakeDigestDeployment measures what a typical WakeDigest adds to
// each received version: the Available condition of a served Deployment,
// hashed. Compare with BenchmarkPackedDeployment.
func BenchmarkWakeDigestDeployment(b *testing.B) {
	var m map[string]any
	if err := json.Unmarshal([]byte(servedDeployment), &m); err != nil {
		b.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	digest := func(u *unstructured.Unstructured) uint64 {
		h := fnv.New64a()
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Progressing" {
				fmt.Fprintf(h, "%v\x00%v\x00%v", m["status"], m["reason"], m["message"])
			}
		}
		return h.Sum64()
	}
	b.ReportAllocs()
	for b.Loop() {
		digest(u)
	}
}

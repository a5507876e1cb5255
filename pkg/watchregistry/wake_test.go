// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"hash/fnv"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// readyDigest digests the status and reason of an object's Ready condition,
// as an operator waiting on its objects' health would; the rest of status
// (heartbeats, counters) is churn it ignores.
func readyDigest(u *unstructured.Unstructured) uint64 {
	h := fnv.New64a()
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			status, _ := m["status"].(string)
			reason, _ := m["reason"].(string)
			h.Write([]byte(status + "\x00" + reason))
		}
	}
	return h.Sum64()
}

func readyOf(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// readyStatus is a status whose Ready condition has the given status, with
// churn in heartbeat and replicas.
func readyStatus(ready, heartbeat string, replicas int64) map[string]any {
	return map[string]any{
		"replicas": replicas,
		"conditions": []any{map[string]any{
			"type": "Ready", "status": ready, "reason": "Reason" + ready, "lastHeartbeatTime": heartbeat,
		}},
	}
}

// TestStatusOnlyUpdatesWakeOnADigestChange writes, through a status
// subresource, one status that sets the Ready condition, two that churn the
// rest of status, and one that flips Ready, then edits a label: with a
// WakeDigest of the Ready condition the first and the flip are delivered as
// EventDigestChanged and the churn is not; without one, only the label edit
// is delivered, as before.
func TestStatusOnlyUpdatesWakeOnADigestChange(t *testing.T) {
	admin := newClients(t, controlPlane(t))
	gvr := crd(t, admin, "wake.watchregistry.test", "Beacon", true)
	for _, tc := range []struct {
		name   string
		digest func(*unstructured.Unstructured) uint64
	}{
		{"with a digest", readyDigest},
		{"without a digest", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t, admin.cs)
			rec := &recorder{}
			r := startRegistry(t, admin, watchregistry.Options[string]{Enqueue: rec.enqueue, WakeDigest: tc.digest})
			ref := watchregistry.Ref{GVR: gvr, Namespace: ns}
			track(t, r, "owner", ref)
			waitState(t, r, ref, watchregistry.StateSynced)
			ctx := context.Background()
			client := admin.dyn.Resource(gvr).Namespace(ns)

			obj, err := client.Create(ctx, customResource(gvr, "Beacon", ns, "cr", "owner"), metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rec.waitAfter(t, 0, "the add", isEvent(watchregistry.EventAdded, "cr"))
			pos := rec.mark()

			setStatus := func(status map[string]any) string {
				t.Helper()
				obj.Object["status"] = status
				if obj, err = client.UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				return obj.GetResourceVersion()
			}
			notReady := setStatus(readyStatus("False", "t1", 0))
			setStatus(readyStatus("False", "t2", 0))
			setStatus(readyStatus("False", "t3", 1))
			ready := setStatus(readyStatus("True", "t3", 1))
			// Events of one informer arrive in order: once the label edit is
			// delivered, every status write before it has been handled.
			barrier, err := client.Patch(ctx, "cr", types.MergePatchType, []byte(`{"metadata":{"labels":{"barrier":"1"}}}`), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rec.waitAfter(t, pos, "the label edit", func(x record) bool {
				return forObject("cr")(x) && x.ev.Object.GetResourceVersion() == barrier.GetResourceVersion()
			})

			var got []string
			for _, x := range rec.since(pos) {
				got = append(got, string(x.ev.Type)+"@"+x.ev.Object.GetResourceVersion())
			}
			want := []string{"Updated@" + barrier.GetResourceVersion()}
			filtered, woken := uint64(4), uint64(0)
			if tc.digest != nil {
				want = append([]string{"DigestChanged@" + notReady, "DigestChanged@" + ready}, want...)
				filtered, woken = 2, 2
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("events after the status writes (-want +got):\n%s", diff)
			}
			s := r.Stats()
			if s.Filtered[watchregistry.FilterStatusOnly] != filtered || s.DeliveredByType[watchregistry.EventDigestChanged] != woken {
				t.Fatalf("status-only filtered %d, digest changes delivered %d; want %d and %d",
					s.Filtered[watchregistry.FilterStatusOnly], s.DeliveredByType[watchregistry.EventDigestChanged], filtered, woken)
			}
			if tc.digest != nil {
				// The flip carries the version it flipped from.
				flip := rec.since(pos)[1].ev
				if was, is := readyOf(flip.Old), readyOf(flip.Object); was != "False" || is != "True" {
					t.Fatalf("the flip carries Ready %q -> %q, want False -> True", was, is)
				}
			}

			// A spec change is the usual update, whatever the digest.
			pos = rec.mark()
			changed, err := client.Patch(ctx, "cr", types.MergePatchType, []byte(`{"spec":{"size":2}}`), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			gotEv := rec.waitAfter(t, pos, "the spec change", forObject("cr"))
			if gotEv.ev.Type != watchregistry.EventUpdated || gotEv.ev.Object.GetResourceVersion() != changed.GetResourceVersion() {
				t.Fatalf("first event after the spec change: %s, want Updated at %s", gotEv, changed.GetResourceVersion())
			}
		})
	}
}

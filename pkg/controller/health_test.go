// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/internal/wakequeue"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// healthWakes sends the watch events of one managed object, a tenant's
// custom resource, to a controller on the fakes, and takes from its queue
// what workers would, on the fake clock.
type healthWakes struct {
	t   *testing.T
	c   *Controller
	clk *clocktesting.FakeClock
	key cache.ObjectName
	// obj is the object as last sent, ready whether it is Current, and n
	// the number of its changes so far.
	obj   *unstructured.Unstructured
	ready bool
	n     int
}

func newHealthWakes(t *testing.T) *healthWakes {
	vr := newVR(operatorNS, "app", configMapManifest, reportedInSync)
	f := newFixture(t, []*v1alpha1.VidraResource{vr})
	h := &healthWakes{t: t, c: f.newController(), clk: f.clock, key: cache.MetaObjectToName(vr)}
	h.obj = h.object("0 of 3 members joined")
	return h
}

// object is the custom resource with its Ready condition saying msg.
func (h *healthWakes) object(msg string) *unstructured.Unstructured {
	status := "False"
	if h.ready {
		status = "True"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1", "kind": "Redis",
		"metadata": map[string]any{"namespace": operatorNS, "name": "cache", "generation": int64(1)},
		"status": map[string]any{"observedGeneration": int64(1), "conditions": []any{
			map[string]any{"type": "Ready", "status": status, "reason": "Members", "message": msg},
		}},
	}}
}

// change changes the object's health, as the watch registry tells it: its
// status (Current, InProgress) when status is set, else only its message.
func (h *healthWakes) change(status bool) {
	h.n++
	if status {
		h.ready = !h.ready
	}
	old := h.obj
	h.obj = h.object(fmt.Sprintf("%d of 3 members joined", h.n%3))
	h.c.wake(h.key, watchregistry.Event{
		Type: watchregistry.EventDigestChanged,
		Ref:  watchregistry.Ref{GVR: schema.GroupVersionResource{Group: "cache.example.com", Version: "v1", Resource: "redises"}},
		Old:  old, Object: h.obj,
	})
}

// drift changes the object itself, not only its status.
func (h *healthWakes) drift() {
	h.c.wake(h.key, watchregistry.Event{Type: watchregistry.EventUpdated, Old: h.obj, Object: h.obj})
}

// marker is a key of its own, sent through the queue behind everything
// asked for before it; nudge one that is never due in a case.
var (
	marker = cache.ObjectName{Namespace: "marker", Name: "marker"}
	nudge  = cache.ObjectName{Namespace: "marker", Name: "nudge"}
)

// handedOut returns the triggers of the reconciles of the resource the
// queue hands out now, as a worker takes them, behind two markers sent
// through the delaying queue's goroutine one after the other.
//
// That goroutine looks at the clock at the top of each turn and hands out
// every key due by then, in the order due. A marker sent due a nanosecond
// from now, before the clock steps over it, comes out behind them. But
// the goroutine may take the marker in after the clock stepped, and hand
// it out at once, ahead of a key whose timer fired but which it has not
// handed out yet: it does so at the top of its next turn, before it can
// take in anything else. A second marker, sent once the first is out,
// comes out behind every key due by now.
//
// It also reads the clock, then sets a timer for the next key due: a step
// of the clock in between makes the timer late by the step, and the
// marker would wait for a step the case never takes. Each key sent starts
// a new turn, so while the queue is empty, a key due in a day nudges it.
func (h *healthWakes) handedOut() []Trigger {
	h.t.Helper()
	var got []Trigger
	for range 2 {
		h.c.queue.AddAfter(marker, TriggerEvent, time.Nanosecond)
		h.clk.Step(time.Nanosecond)
		for {
			err := wait.PollUntilContextTimeout(h.t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				if h.c.queue.Len() > 0 {
					return true, nil
				}
				h.c.queue.AddAfter(nudge, TriggerEvent, 24*time.Hour)
				return false, nil
			})
			if err != nil {
				h.t.Fatalf("the marker sent through the queue never came out: %v", err)
			}
			it, _ := h.c.queue.Get()
			if it.Key != marker {
				tr, _ := h.c.queue.Take(wakequeue.Item{Key: it.Key, Got: h.clk.Now()})
				got = append(got, tr)
			}
			h.c.queue.Done(it)
			if it.Key == marker {
				break
			}
		}
	}
	return got
}

func (h *healthWakes) expect(when string, want ...Trigger) {
	h.t.Helper()
	if got := h.handedOut(); !slices.Equal(got, want) {
		h.t.Fatalf("%s: reconciles handed out %v, want %v", when, got, want)
	}
}

// A tenant's server can change an object's condition message a thousand
// times a second, and each change of health used to be a reconcile and a
// status write at once. Changes of the message alone now wake the resource
// at most once a second: the first at once, the others of that second
// together, a second after.
func TestHealthMessageChurnWakesAResourceOnceASecond(t *testing.T) {
	h := newHealthWakes(t)
	start := h.clk.Now()
	for w := range 3 {
		for i := range 100 {
			h.change(false)
			if w == 0 && i == 0 {
				h.expect("the first change", TriggerHealth)
			} else {
				h.expect(fmt.Sprintf("change %d of second %d", i+1, w+1))
			}
			h.clk.Step(5 * time.Millisecond)
		}
		h.clk.SetTime(start.Add(time.Duration(w+1) * time.Second))
		h.expect(fmt.Sprintf("the end of second %d", w+1), TriggerHealth)
	}
	// Quiet for a second: the next change is seen at once again.
	h.clk.Step(wakequeue.HealthEvery)
	h.change(false)
	h.expect("a change after a quiet second", TriggerHealth)
}

// A change of status is what Ready and dependents wait for: it is seen at
// once while the burst lasts, then within a second, at most once a second
// however fast the status flips.
func TestHealthStatusFlipsAreSeenWithinASecond(t *testing.T) {
	h := newHealthWakes(t)
	start := h.clk.Now()
	for w := range 3 {
		for i := range 100 {
			h.change(true)
			if w == 0 && i < wakequeue.HealthBurst {
				h.expect(fmt.Sprintf("flip %d", i+1), TriggerHealth)
			} else {
				h.expect(fmt.Sprintf("flip %d of second %d", i+1, w+1))
			}
			h.clk.Step(5 * time.Millisecond)
		}
		h.clk.SetTime(start.Add(time.Duration(w+1) * time.Second))
		h.expect(fmt.Sprintf("the end of second %d", w+1), TriggerHealth)
	}
}

// A change of status amid a churn of messages does not wait for the
// messages' second, and drift is never paced.
func TestHealthStatusAndDriftDoNotWaitForMessages(t *testing.T) {
	h := newHealthWakes(t)
	start := h.clk.Now()
	h.change(false)
	h.expect("the first message", TriggerHealth)
	h.clk.Step(100 * time.Millisecond)
	h.change(false)
	h.expect("the next message, within the second")
	h.drift()
	h.expect("drift", TriggerEvent)
	h.clk.Step(100 * time.Millisecond)
	h.change(true)
	h.expect("a change of status", TriggerHealth)
	h.clk.SetTime(start.Add(wakequeue.HealthEvery))
	h.expect("the messages' second", TriggerHealth)
}

// The delaying queue keeps one entry per key, the earliest: a health wake
// asked for while a retry is due sooner is folded into the retry. A change
// after that retry ran must still bring the resource back within the
// second.
func TestHealthChangeAfterAnEarlierWakeTookItsPlaceIsSeen(t *testing.T) {
	h := newHealthWakes(t)
	start := h.clk.Now()
	h.change(false)
	h.expect("the first message", TriggerHealth)
	h.c.enqueueAfter(h.key, TriggerRetry, 200*time.Millisecond)
	h.clk.Step(10 * time.Millisecond)
	h.change(false)
	h.expect("a message within the second")
	h.clk.SetTime(start.Add(250 * time.Millisecond))
	h.expect("the retry", TriggerRetry)
	h.clk.Step(50 * time.Millisecond)
	h.change(false)
	h.expect("a message after the retry")
	h.clk.SetTime(start.Add(wakequeue.HealthEvery))
	h.expect("the end of the second", TriggerHealth)
}

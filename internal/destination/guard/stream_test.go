// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/vidra-operator/vidra/internal/destination/guard/hostiletest"
)

// A watch stream is bounded per event, not in all: a long watch carries any
// number of events under the limit.
func TestRemoteWatchCarriesAnyNumberOfEventsUnderTheLimit(t *testing.T) {
	const limit, events = 4 << 10, 200
	srv := hostiletest.Server(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := range events {
			// Brackets and quotes inside strings are no event boundary.
			fmt.Fprint(w, watchEvent(fmt.Sprintf("cm-%d", i), strings.Repeat(`{"}]\`, 500)))
		}
	})
	c, _ := clientsFor(t, srv, limit)
	w, err := c.watch.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	n := 0
	for ev := range w.ResultChan() {
		if ev.Type != watch.Added {
			t.Fatalf("event %d: %s %v", n, ev.Type, ev.Object)
		}
		n++
	}
	if n != events {
		t.Errorf("%d events of %d arrived", n, events)
	}
}

// A watch event over the limit ends the watch with an error that says so,
// before client-go's decoder has buffered it, and opens the breaker.
func TestRemoteWatchEventOverTheLimitEndsTheWatch(t *testing.T) {
	const limit = 1 << 20
	srv := hostiletest.Server(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, watchEvent("small", "v"))
		// Braces in a string: the event does not end in them.
		hostiletest.StreamJSON(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"huge","namespace":"ns"},"data":{"k":"`+strings.Repeat("}", 1000), `"}}}`, 64<<20)
	})
	c, allocated := clientsFor(t, srv, limit)
	got := watchEvents(t, c.watch)
	if len(got) != 2 || got[0] != "ADDED small" || !strings.Contains(got[1], "sent a watch event over 1 MiB") {
		t.Fatalf("events %q; want the small one, then an error saying the next is over 1 MiB", got)
	}
	if !c.failures.any() {
		t.Error("the event over the limit did not open the breaker")
	}
	if alloc := allocated(); alloc > 16<<20 {
		t.Errorf("ending a watch at a 64 MiB event allocated %d MiB", alloc>>20)
	}
}

// A watch event is bounded in values as well as in bytes.
func TestRemoteWatchEventOfTinyValuesEndsTheWatch(t *testing.T) {
	srv := hostiletest.Server(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, watchEvent("small", "v"))
		io.WriteString(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"huge","namespace":"ns"},"data":{"k":[`)
		for i := range 2 * maxEventValues {
			if i > 0 {
				io.WriteString(w, ",")
			}
			io.WriteString(w, "[]")
		}
		io.WriteString(w, "]}}}\n")
	})
	c, _ := clientsFor(t, srv, 64<<20)
	got := watchEvents(t, c.watch)
	want := fmt.Sprintf("sent a watch event over %d JSON values", maxEventValues)
	if len(got) != 2 || got[0] != "ADDED small" || !strings.Contains(got[1], want) {
		t.Fatalf("events %q; want the small one, then an error saying %q", got, want)
	}
	if !c.failures.any() {
		t.Error("the event over the limit did not open the breaker")
	}
}

// client-go's decoders keep buffers of about twice the largest event a
// watch carried, for as long as it lasts: twenty watches that each carried
// one 3.9 MiB event held 174 MiB, and a server can send events that cache
// nothing (a delete of a name it never sent). A watch now ends, cleanly,
// after an event over 64 KiB, which client-go delivers first; the informer
// watches again from there.
func TestRemoteWatchEndsAfterALargeEvent(t *testing.T) {
	srv := hostiletest.Server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, watchEvent("small", "v"))
		fmt.Fprint(w, strings.Replace(watchEvent("large", strings.Repeat("a", 100<<10)), "ADDED", "DELETED", 1))
		fmt.Fprint(w, watchEvent("after", "v"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	c, _ := clientsFor(t, srv, maxEventBytes)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	w, err := c.watch.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []string
	for ev := range w.ResultChan() {
		o, _ := ev.Object.(metav1.Object)
		got = append(got, string(ev.Type)+" "+o.GetName())
	}
	if ctx.Err() != nil {
		t.Fatalf("the stream went on after the large event: %q", got)
	}
	if len(got) != 2 || got[0] != "ADDED small" || got[1] != "DELETED large" {
		t.Fatalf("events %q; want the small one and the large one, then the end of the stream", got)
	}
	if c.failures.any() {
		t.Error("a large event under the limits opened the breaker")
	}
}

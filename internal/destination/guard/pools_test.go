// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/vidra-operator/vidra/internal/destination/guard/hostiletest"
)

// The watch streams of one namespace's remote clusters share a pool of
// bytes: a server can trickle an event and hold it unfinished, and a tenant
// chooses how many kinds its clusters watch. Past the pool a watch ends with
// an error that says so, and a stream gives back what it held when it ends.
func TestRemoteWatchesOfANamespaceShareAPool(t *testing.T) {
	const partial = 100 << 10
	srv := hostiletest.Server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"held","namespace":"ns"},"data":{"k":"`+strings.Repeat("a", partial))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	g := newTest(t, Config{})
	// Room for two streams and their events, and a third stream's start.
	g.poolBytes = 2*(partial+watchStreamBytes+poolStep) + watchStreamBytes + poolStep
	c := clientsIn(t, srv, g, "team-a")
	pool := g.watchPool("team-a")
	configMaps := c.watch.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns")

	// Two streams, each holding 100 KiB of an unfinished event, fit.
	var held []watch.Interface
	for i := range 2 {
		w, err := configMaps.Watch(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
		held = append(held, w)
		waitFor(t, "the stream's partial event counted", func() bool { return pool.inUse() > int64(i)*partial+partial })
	}
	// The third crosses the pool: it ends with an error that says so.
	got := watchEvents(t, c.watch)
	want := "the watches of the remote clusters of namespace team-a would hold more than"
	if len(got) != 1 || !strings.Contains(got[0], want) {
		t.Fatalf("events of the third watch %q; want an error saying %q", got, want)
	}
	if !c.failures.any() {
		t.Error("the watch past the pool did not open the breaker")
	}
	for _, w := range held {
		w.Stop()
	}
	waitFor(t, "the streams gave back what they held", func() bool { return pool.inUse() == 0 })
	if other := g.watchPool("team-b"); other == pool {
		t.Error("two namespaces share one pool")
	}
}

// pauses records the waits of the watch streams of a guard instead of
// waiting them out, as long as the stream is open.
type pauses struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (p *pauses) pause(d time.Duration, stop, _ <-chan struct{}) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waits = append(p.waits, d)
	select {
	case <-stop:
		return false
	default:
		return true
	}
}

// longest returns the longest wait recorded from the from-th on, and how
// many there were.
func (p *pauses) longest(from int) (time.Duration, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var most time.Duration
	for _, d := range p.waits[from:] {
		most = max(most, d)
	}
	return most, len(p.waits) - from
}

// One tenant's server streaming 42,000 small events a second into a watch
// took 1.4 of the operator's cores. The watch streams of one namespace's
// remote clusters are read no faster than their pool's events allow: an
// event counts one, and one more for every KiB, white space included.
// Other namespaces have their own, and the operator's namespace none.
func TestRemoteWatchesOfANamespaceArePaced(t *testing.T) {
	const rate, burst = 100, 10
	const events = 30
	var stream strings.Builder
	for i := range events {
		stream.WriteString(watchEvent(fmt.Sprintf("c%d", i), "v"))
	}
	// White space costs by the KiB.
	stream.WriteString(strings.Repeat(" ", 10<<10))
	srv := hostiletest.Server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, stream.String())
	})
	g := newTest(t, Config{})
	g.eventRate, g.eventBurst = rate, burst
	var p pauses
	g.pause = p.pause
	// The pace is reckoned on a stopped clock: no token comes back while
	// the test runs, so a pool's tokens say exactly what its streams were
	// charged, however long the test takes.
	stopped := time.Now()
	g.now = func() time.Time { return stopped }
	teamA := clientsIn(t, srv, g, "team-a").watch
	teamAAgain := clientsIn(t, srv, g, "team-a").watch
	teamB := clientsIn(t, srv, g, "team-b").watch
	operators := clientsIn(t, srv, g, testOperatorNamespace).watch

	// Each stream counts its events, and a KiB of its text, events and
	// white space together, as one more: two streams of team-a's clusters
	// are charged to one pool, whichever cluster they are of, and wait for
	// what they owe (all but what the last read of a stream brought with
	// its end, which nothing waits for).
	units := events + stream.Len()/eventUnitBytes
	for _, c := range []dynamic.Interface{teamA, teamAAgain} {
		if got := watchEvents(t, c); len(got) != events {
			t.Fatalf("%d events of %d read", len(got), events)
		}
	}
	tokens := func(ns string) float64 { return g.watchPool(ns).events.TokensAt(stopped) }
	if got, want := tokens("team-a"), float64(burst-2*units); got != want {
		t.Errorf("team-a's pool has %v tokens left; want %v: its streams counted %d each", got, want, units)
	}
	owed := time.Duration(2*units-burst) * time.Second / rate
	if longest, n := p.longest(0); longest <= owed/2 || longest > owed {
		t.Errorf("the streams of team-a waited at most %v in %d waits; want up to %v", longest, n, owed)
	}
	for _, c := range []dynamic.Interface{teamB, operators} {
		watchEvents(t, c)
	}
	if got, want := tokens("team-b"), float64(burst-units); got != want {
		t.Errorf("team-b's pool has %v tokens left; want %v, its own stream's charge and nothing of team-a's", got, want)
	}
	if got := tokens(testOperatorNamespace); got != burst {
		t.Errorf("the operator's namespace was charged %v; want nothing", burst-got)
	}
}

// A stream waiting for its pace ends as soon as the watch is stopped.
func TestRemotePacedWatchStops(t *testing.T) {
	srv := hostiletest.Server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := range 10 {
			fmt.Fprint(w, watchEvent(fmt.Sprintf("c%d", i), "v"))
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	g := newTest(t, Config{})
	// What the ten events owe takes some 100 s.
	g.eventRate, g.eventBurst = 0.1, 1
	waiting := make(chan struct{})
	var once sync.Once
	g.pause = func(d time.Duration, stop, cancel <-chan struct{}) bool {
		once.Do(func() { close(waiting) })
		return pause(d, stop, cancel)
	}
	c := clientsIn(t, srv, g, "team-a").watch
	w, err := c.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The ten events come in one read; the stream waits before the next.
	for timeout := time.After(10 * time.Second); ; {
		select {
		case <-w.ResultChan():
			continue
		case <-waiting:
		case <-timeout:
			t.Fatal("the stream never waited for its pace")
		}
		break
	}
	w.Stop()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, open := <-w.ResultChan():
			if !open {
				return
			}
		case <-deadline:
			t.Fatal("the stopped watch went on waiting for its pace")
		}
	}
}

// A cluster whose discovery document was refused is not asked for
// discovery again for a while: with aggregated discovery the RESTMapper
// would ask for it on every mapping, and have it refused every time. The
// refusal fails the request, not the server.
func TestRemoteRefusedDiscoveryIsNotAskedAgainAtOnce(t *testing.T) {
	var served atomic.Int64
	srv := hostiletest.Server(t, func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		hostiletest.ResourceList(w, 1000)
	})
	g := newTest(t, Config{})
	g.discoveryValues = 1000
	c := clientsIn(t, srv, g, "team-a")
	dc := c.discovery
	want := "would make the remote clusters of namespace team-a hold more than 1000 JSON values"
	for i := range 3 {
		_, err := dc.ServerResourcesForGroupVersion("h.example/v1")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("ask %d: err = %v; want one saying %q", i+1, err, want)
		}
	}
	if n := served.Load(); n != 1 {
		t.Errorf("the server was asked %d times; want once, then the refusal again", n)
	}
	if c.failures.any() {
		t.Error("a refused discovery document opened the breaker")
	}
}

// The discovery a cluster holds goes back to its namespace's pool when its
// clients are dropped (Cluster.Close): another cluster may then hold as
// much.
func TestRemoteDiscoveryPoolIsGivenBackWhenClustersClose(t *testing.T) {
	srv := hostiletest.Server(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		hostiletest.ResourceList(w, 1000)
	})
	g := newTest(t, Config{})
	g.discoveryValues = 6000 // one document of 5,000 values, not two
	first := clientsIn(t, srv, g, "team-a")
	if _, err := first.discovery.ServerResourcesForGroupVersion("h.example/v1"); err != nil {
		t.Fatalf("the first cluster's discovery, under the bound: %v", err)
	}
	second := clientsIn(t, srv, g, "team-a")
	if _, err := second.discovery.ServerResourcesForGroupVersion("h.example/v1"); err == nil {
		t.Fatal("a second cluster's discovery over the namespace's pool was read")
	}
	first.cluster.Close()
	second.cluster.Close()
	first.cluster.Close() // twice: nothing more is given back
	if n := g.discoveryPools["team-a"].inUse(); n != 0 {
		t.Fatalf("the pool counts %d values after every cluster was dropped", n)
	}
	third := clientsIn(t, srv, g, "team-a")
	if _, err := third.discovery.ServerResourcesForGroupVersion("h.example/v1"); err != nil {
		t.Errorf("a cluster's discovery after the others were dropped: %v", err)
	}
}

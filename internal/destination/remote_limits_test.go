// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"k8s.io/client-go/transport"
	"k8s.io/utils/clock"
)

// hostileServer is a TLS server of a tenant's own, answering every request
// with handler.
func hostileServer(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

// clientsFor builds Vidra's own clients of a remote cluster (guard, breaker,
// timeouts) for srv, with the answer limits shrunk to limit so that the
// tests need not send hundreds of MiB.
func clientsFor(t *testing.T, srv *httptest.Server, limit int64) (*clusterClients, dynamic.Interface, func() (allocated uint64)) {
	t.Helper()
	g := guard(t, Guard{})
	g.requests.answer, g.requests.event = limit, limit
	g.discovery.answer, g.discovery.event = limit, limit
	g.informers.answer, g.informers.event = 4*limit, limit
	cc, watchDyn := remoteClientsIn(t, srv, g, "tenant")
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	return cc, watchDyn, func() uint64 {
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
}

// testOperatorNamespace is the operator's namespace of remoteClientsIn.
const testOperatorNamespace = "vidra-system"

// remoteClientsIn builds Vidra's own clients of a remote cluster for srv,
// under guard g, as for a kubeconfig Secret of namespace ns: the clients of
// a tenant's namespace are bounded by its pools, those of
// testOperatorNamespace are not. Each call is a cluster of its own.
func remoteClientsIn(t *testing.T, srv *httptest.Server, g *remoteGuard, ns string) (*clusterClients, dynamic.Interface) {
	t.Helper()
	return remoteClientsOn(t, srv, g, ns, clock.RealClock{})
}

// remoteClientsOn is remoteClientsIn with the clock clk.
func remoteClientsOn(t *testing.T, srv *httptest.Server, g *remoteGuard, ns string, clk clock.Clock) (*clusterClients, dynamic.Interface) {
	t.Helper()
	r := &remotes{base: &rest.Config{QPS: 100, Burst: 100}, guard: g, clock: clk, namespace: testOperatorNamespace}
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	cc, watchDyn, err := r.newRemoteClients(remoteKey{secret: cache.ObjectName{Namespace: ns, Name: "kubeconfig"}, server: srv.URL}, cfg, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return cc, watchDyn
}

// resourceList writes the discovery document of group h.example/v1 with n
// resources, five JSON values each.
func resourceList(w io.Writer, n int) {
	io.WriteString(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"h.example/v1","resources":[`)
	for i := range n {
		if i > 0 {
			io.WriteString(w, ",")
		}
		fmt.Fprintf(w, `{"name":"r%d","kind":"K%d","verbs":[]}`, i, i)
	}
	io.WriteString(w, `]}`)
}

// streamJSON writes a JSON answer of about size bytes: prefix, a string of
// size bytes, suffix, until the client stops reading.
func streamJSON(w http.ResponseWriter, prefix, suffix string, size int) {
	w.Header().Set("Content-Type", "application/json")
	if _, err := io.WriteString(w, prefix); err != nil {
		return
	}
	chunk := strings.Repeat("a", 64<<10)
	for sent := 0; sent < size; sent += len(chunk) {
		if _, err := io.WriteString(w, chunk); err != nil {
			return
		}
	}
	_, _ = io.WriteString(w, suffix)
}

// A tenant's own "API server" answers discovery with a body far over the
// limit. Vidra reads no more than the limit, fails with an error that says
// so, and opens the server's breaker. (A 200 MiB answer once took the heap
// to 2.5 GiB and the caller 2.5 minutes.)
func TestRemoteAnswerOverTheLimitIsRefused(t *testing.T) {
	const limit, size = 1 << 20, 64 << 20
	srv := hostileServer(t, func(w http.ResponseWriter, _ *http.Request) {
		streamJSON(w, `{"kind":"APIVersions","versions":["`, `"]}`, size)
	})
	cc, _, allocated := clientsFor(t, srv, limit)
	_, err := cc.mapper.Mapping(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	alloc := allocated()
	want := fmt.Sprintf("the API server at %s sent an answer over 1 MiB", srv.URL)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want one saying %q", err, want)
	}
	if !IsUnreachable(err) || !cc.breaker.isOpen() {
		t.Errorf("the answer over the limit did not count as a failure of the server: unreachable %v, breaker open %v", IsUnreachable(err), cc.breaker.isOpen())
	}
	if alloc > 16<<20 {
		t.Errorf("refusing a %d MiB answer allocated %d MiB", size>>20, alloc>>20)
	}
	t.Logf("%d MiB answer, limit 1 MiB: %d MiB allocated; %v", size>>20, alloc>>20, err)
}

// An answer that says its length up front is refused before it is read.
func TestRemoteAnswerDeclaredOverTheLimitIsNotRead(t *testing.T) {
	srv := hostileServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(8<<20))
		w.WriteHeader(http.StatusOK)
		// The server need not send what it announced: nothing is read.
	})
	cc, _, _ := clientsFor(t, srv, 1<<20)
	_, err := cc.probe.Get().AbsPath("/version").Do(t.Context()).Raw()
	if err == nil || !strings.Contains(err.Error(), "sent an answer over 1 MiB") {
		t.Fatalf("err = %v; want an answer over 1 MiB", err)
	}
}

// The informers' clients read lists, which get a larger limit than other
// answers, and bound them too.
func TestRemoteListOverTheLimitIsRefused(t *testing.T) {
	const limit = 256 << 10
	list := func(size int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			streamJSON(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns"},"data":{"k":"`, `"}}]}`, size)
		}
	}
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

	// Over the limit of one object, under that of a list: read.
	srv := hostileServer(t, list(2*limit))
	_, watchDyn, _ := clientsFor(t, srv, limit)
	if l, err := watchDyn.Resource(cms).Namespace("ns").List(t.Context(), metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Fatalf("a list under the list limit: %v", err)
	}

	// Over the limit of a list: refused.
	srv = hostileServer(t, list(64<<20))
	cc, watchDyn, allocated := clientsFor(t, srv, limit)
	_, err := watchDyn.Resource(cms).Namespace("ns").List(t.Context(), metav1.ListOptions{})
	if err == nil || !strings.Contains(err.Error(), "sent a list over 1 MiB") {
		t.Fatalf("err = %v; want a list over 1 MiB (the list limit)", err)
	}
	if !cc.breaker.isOpen() {
		t.Error("the list over the limit did not open the breaker")
	}
	if alloc := allocated(); alloc > 16<<20 {
		t.Errorf("refusing a 64 MiB list allocated %d MiB", alloc>>20)
	}
}

// watchEvents watches the ConfigMaps of namespace ns until the stream ends,
// and returns its events as "<type> <name>", or "error: <status>".
func watchEvents(t *testing.T, c dynamic.Interface) []string {
	t.Helper()
	w, err := c.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []string
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			got = append(got, fmt.Sprintf("error: %v", ev.Object))
			continue
		}
		o, _ := ev.Object.(metav1.Object)
		got = append(got, string(ev.Type)+" "+o.GetName())
	}
	return got
}

// watchEvent is one JSON watch event of a ConfigMap whose value is data.
func watchEvent(name, data string) string {
	return fmt.Sprintf(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":%q,"namespace":"ns","resourceVersion":"1"},"data":{"k":%q}}}`+"\n", name, data)
}

// A watch stream is bounded per event, not in all: a long watch carries any
// number of events under the limit.
func TestRemoteWatchCarriesAnyNumberOfEventsUnderTheLimit(t *testing.T) {
	const limit, events = 4 << 10, 200
	srv := hostileServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := range events {
			// Brackets and quotes inside strings are no event boundary.
			fmt.Fprint(w, watchEvent(fmt.Sprintf("cm-%d", i), strings.Repeat(`{"}]\`, 500)))
		}
	})
	_, watchDyn, _ := clientsFor(t, srv, limit)
	w, err := watchDyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Watch(t.Context(), metav1.ListOptions{})
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
	srv := hostileServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, watchEvent("small", "v"))
		// Braces in a string: the event does not end in them.
		streamJSON(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"huge","namespace":"ns"},"data":{"k":"`+strings.Repeat("}", 1000), `"}}}`, 64<<20)
	})
	cc, watchDyn, allocated := clientsFor(t, srv, limit)
	got := watchEvents(t, watchDyn)
	if len(got) != 2 || got[0] != "ADDED small" || !strings.Contains(got[1], "sent a watch event over 1 MiB") {
		t.Fatalf("events %q; want the small one, then an error saying the next is over 1 MiB", got)
	}
	if !cc.breaker.isOpen() {
		t.Error("the event over the limit did not open the breaker")
	}
	if alloc := allocated(); alloc > 16<<20 {
		t.Errorf("ending a watch at a 64 MiB event allocated %d MiB", alloc>>20)
	}
}

// What a tenant's server might send to slip past the limits: protobuf
// (which no count of its text bounds), a stream announced on an answer that
// is not a watch's, a redirect the client does not follow, and a kind of
// discovery's on an answer that is not discovery's. Each is read within
// the limits or replaced.
func TestRemoteAnswersThatTryToSlipPastTheLimits(t *testing.T) {
	var accepts atomic.Value
	srv := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		accepts.Store(r.Header.Get("Accept"))
		switch r.URL.Query().Get("try") {
		case "protobuf":
			w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
			io.WriteString(w, "k8s\x00"+strings.Repeat("\x0a\x00", 1<<20))
		case "stream":
			w.Header().Set("Content-Type", "application/json;stream=watch")
			streamJSON(w, `{}`+strings.Repeat("{}", 1<<10), "", 64<<20)
		case "redirect":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMultipleChoices)
			streamJSON(w, `{"kind":"Status","apiVersion":"v1","message":"`, `"}`, 64<<20)
		case "kind":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"kind":"APIResourceList","apiVersion":"v1","items":[`+strings.TrimSuffix(strings.Repeat("{},", 2*maxAnswerValues), ",")+`]}`)
		}
	})
	for try, want := range map[string]string{
		"protobuf": "not a Kubernetes API answer (application/vnd.kubernetes.protobuf; not shown)",
		"stream":   "sent an answer over 8 MiB",
		"redirect": "answered HTTP 300 with a body that is not a Kubernetes API answer",
		"kind":     fmt.Sprintf("sent an answer over %d JSON values", maxAnswerValues),
	} {
		// Clients of their own: one refusal opens the breaker of the next.
		cc, _, allocated := clientsFor(t, srv, 8<<20)
		err := cc.probe.Get().AbsPath("/api/v1/namespaces/ns/configmaps/a").Param("try", try).SetHeader("Accept", "application/vnd.kubernetes.protobuf,application/json").Do(t.Context()).Error()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v; want one saying %q", try, err, want)
		}
		if a, _ := accepts.Load().(string); strings.Contains(a, "protobuf") {
			t.Errorf("%s: the server was asked for protobuf: Accept %q", try, a)
		}
		if alloc := allocated(); alloc > 48<<20 {
			t.Errorf("%s: refusing it allocated %d MiB", try, alloc>>20)
		}
	}
}

// Discovery documents get a larger bound, told by the path asked for.
func TestRemoteDiscoveryIsToldByItsPath(t *testing.T) {
	for _, tc := range []struct {
		path      string
		discovery bool
	}{
		{"/api", true}, {"/apis", true}, {"/api/v1", true}, {"/apis/apps/v1", true},
		{"/api/v1/configmaps", false}, {"/apis/apps/v1/deployments", false}, {"/apis/apps/v1/namespaces/a/deployments/b", false}, {"/version", false},
	} {
		req, _ := http.NewRequest(http.MethodGet, "https://remote.example"+tc.path, nil)
		if got := isDiscoveryPath(req); got != tc.discovery {
			t.Errorf("%s: discovery %v, want %v", tc.path, got, tc.discovery)
		}
	}
}

// tinyObjects writes n ConfigMaps of a few values each, separated by commas:
// the cheapest text that decodes into the most memory.
func tinyObjects(w io.Writer, from, n int) {
	for i := range n {
		if i > 0 {
			io.WriteString(w, ",")
		}
		fmt.Fprintf(w, `{"metadata":{"name":"c%d","namespace":"ns","labels":{"a":"b"}}}`, from+i)
	}
}

// A list under the byte limit can still decode into far more memory than
// its size: 64 MiB of tiny objects once decoded into 1 GiB. Lists are
// bounded in JSON values too, before client-go decodes them.
func TestRemoteListOfTinyValuesIsRefused(t *testing.T) {
	const objects = 100_000 // 6 MiB of text, 600,000 values
	srv := hostileServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[`)
		tinyObjects(w, 0, objects)
		io.WriteString(w, `]}`)
	})
	cc, watchDyn, allocated := clientsFor(t, srv, 64<<20)
	_, err := watchDyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").List(t.Context(), metav1.ListOptions{})
	want := fmt.Sprintf("sent a list over %d JSON values", maxListValues)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want one saying %q", err, want)
	}
	if !cc.breaker.isOpen() {
		t.Error("the list over the limit did not open the breaker")
	}
	// The text is read (6 MiB, twice over as it grows); decoded, it would
	// be over 100 MiB.
	if alloc := allocated(); alloc > 48<<20 {
		t.Errorf("refusing a list of %d tiny objects allocated %d MiB", objects, alloc>>20)
	}
}

// A server may answer a list in pages, each under the limits, for ever:
// client-go's pager holds every page until the last. The pages of a list
// are bounded together.
func TestRemoteListPagesAddUp(t *testing.T) {
	var pages atomic.Int32
	srv := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		n := pages.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1","continue":"page-%d"},"items":[`, n)
		tinyObjects(w, int(n)*1000, 1000)
		io.WriteString(w, `]}`)
	})
	_, watchDyn, allocated := clientsFor(t, srv, 64<<20)
	lw := &cache.ListWatch{ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (kruntime.Object, error) {
		return watchDyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").List(ctx, o)
	}}
	p := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (kruntime.Object, error) { return lw.ListWithContext(t.Context(), o) }))
	_, _, err := p.ListWithAlloc(t.Context(), metav1.ListOptions{ResourceVersion: "0"})
	want := fmt.Sprintf("sent a list over %d JSON values", maxListValues)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want one saying %q", err, want)
	}
	// 6,000 values a page: the limit is passed on page 42.
	if n := pages.Load(); n != maxListValues/6000+1 {
		t.Errorf("%d pages read; want %d", n, maxListValues/6000+1)
	}
	// The pager holds the 42,000 objects decoded (some 40 MiB), and
	// allocated about three times that on the way; without the bound it
	// grows until the process dies.
	alloc := allocated()
	if alloc > 256<<20 {
		t.Errorf("refusing endless pages allocated %d MiB", alloc>>20)
	}
	t.Logf("%d pages, %d MiB allocated", pages.Load(), alloc>>20)
}

// A list without a continue token starts afresh; pages of another list
// (another selector) are counted apart.
func TestRemoteListPagesAreCountedPerList(t *testing.T) {
	g := &answerGuard{server: "https://remote.example", limits: answerLimits{answer: 1 << 20, values: 10, lists: true}, lists: map[string]listRead{}}
	page := []byte(`{"items":[{},{},{},{}]}`) // 6 values
	read := func(query string) error {
		req, _ := http.NewRequest(http.MethodGet, "https://remote.example/api/v1/configmaps?"+query, nil)
		_, err := g.countValues(req, page, g.boundOf(req))
		return err
	}
	steps := []struct {
		query   string
		refused bool
	}{
		{"labelSelector=a", false},
		{"labelSelector=b", false},           // another list
		{"labelSelector=a&continue=x", true}, // 12 values
		{"labelSelector=a", false},           // afresh
		{"labelSelector=b&continue=y", true}, // 12 values
		{"labelSelector=b&fieldSelector=f", false},
	}
	for i, s := range steps {
		if err := read(s.query); (err != nil) != s.refused {
			t.Errorf("step %d (%s): err = %v; refused want %v", i, s.query, err, s.refused)
		}
	}
}

// A watch event is bounded in values as well as in bytes.
func TestRemoteWatchEventOfTinyValuesEndsTheWatch(t *testing.T) {
	srv := hostileServer(t, func(w http.ResponseWriter, _ *http.Request) {
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
	cc, watchDyn, _ := clientsFor(t, srv, 64<<20)
	got := watchEvents(t, watchDyn)
	want := fmt.Sprintf("sent a watch event over %d JSON values", maxEventValues)
	if len(got) != 2 || got[0] != "ADDED small" || !strings.Contains(got[1], want) {
		t.Fatalf("events %q; want the small one, then an error saying %q", got, want)
	}
	if !cc.breaker.isOpen() {
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
	srv := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, watchEvent("small", "v"))
		fmt.Fprint(w, strings.Replace(watchEvent("large", strings.Repeat("a", 100<<10)), "ADDED", "DELETED", 1))
		fmt.Fprint(w, watchEvent("after", "v"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	cc, watchDyn, _ := clientsFor(t, srv, maxEventBytes)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	w, err := watchDyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Watch(ctx, metav1.ListOptions{})
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
	if cc.breaker.isOpen() {
		t.Error("a large event under the limits opened the breaker")
	}
}

// The watch streams of one namespace's remote clusters share a pool of
// bytes: a server can trickle an event and hold it unfinished, and a tenant
// chooses how many kinds its clusters watch. Past the pool a watch ends with
// an error that says so, and a stream gives back what it held when it ends.
func TestRemoteWatchesOfANamespaceShareAPool(t *testing.T) {
	const partial = 100 << 10
	srv := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"held","namespace":"ns"},"data":{"k":"`+strings.Repeat("a", partial))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	g := guard(t, Guard{})
	// Room for two streams and their events, and a third stream's start.
	g.poolBytes = 2*(partial+watchStreamBytes+poolStep) + watchStreamBytes + poolStep
	cc, watchDyn := remoteClientsIn(t, srv, g, "team-a")
	pool := g.watchPool("team-a")
	configMaps := watchDyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns")

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
	got := watchEvents(t, watchDyn)
	want := "the watches of the remote clusters of namespace team-a would hold more than"
	if len(got) != 1 || !strings.Contains(got[0], want) {
		t.Fatalf("events of the third watch %q; want an error saying %q", got, want)
	}
	if !cc.breaker.isOpen() {
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
	srv := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, stream.String())
	})
	g := guard(t, Guard{})
	g.eventRate, g.eventBurst = rate, burst
	var p pauses
	g.pause = p.pause
	// The pace is reckoned on a stopped clock: no token comes back while
	// the test runs, so a pool's tokens say exactly what its streams were
	// charged, however long the test takes.
	stopped := time.Now()
	g.now = func() time.Time { return stopped }
	_, teamA := remoteClientsIn(t, srv, g, "team-a")
	_, teamAAgain := remoteClientsIn(t, srv, g, "team-a")
	_, teamB := remoteClientsIn(t, srv, g, "team-b")
	_, operators := remoteClientsIn(t, srv, g, testOperatorNamespace)

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
	srv := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := range 10 {
			fmt.Fprint(w, watchEvent(fmt.Sprintf("c%d", i), "v"))
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	g := guard(t, Guard{})
	// What the ten events owe takes some 100 s.
	g.eventRate, g.eventBurst = 0.1, 1
	waiting := make(chan struct{})
	var once sync.Once
	g.pause = func(d time.Duration, stop, cancel <-chan struct{}) bool {
		once.Do(func() { close(waiting) })
		return pause(d, stop, cancel)
	}
	_, c := remoteClientsIn(t, srv, g, "team-a")
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

// waitFor polls cond until it holds, for at most 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A remote cluster's informers list, then watch: a list streamed as a
// watch (client-go's default) is held object by object until the server
// says it is complete, which a tenant's server need never say.
func TestRemoteInformersListInsteadOfStreaming(t *testing.T) {
	var mu sync.Mutex
	var requests []string
	srv := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if isWatch(r) {
			<-r.Context().Done()
			return
		}
		io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	})
	_, watchDyn, _ := clientsFor(t, srv, 64<<20)
	inf := dynamicinformer.NewFilteredDynamicInformer(watchDyn, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, "ns", 0, nil, nil).Informer()
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		inf.RunWithContext(ctx)
	}()
	defer func() {
		cancel()
		<-stopped
	}()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, q := range requests {
		if strings.Contains(q, "sendInitialEvents") {
			t.Fatalf("the informer streamed its list: %q", requests)
		}
	}
	if len(requests) == 0 || strings.Contains(requests[0], "watch=") {
		t.Fatalf("requests %q; want a list first", requests)
	}
}

// The informers of one namespace's clusters read one list at a time, since
// each list is held whole and decoded before it is cached, and a tenant
// chooses how many kinds its clusters list; another namespace's lists do
// not wait for them.
func TestRemoteListsOfANamespaceAreReadOneAtATime(t *testing.T) {
	g := guard(t, Guard{})
	var inFlight, most atomic.Int32
	hold := make(chan struct{})
	var release sync.Once
	srv := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if r.URL.Query().Get("labelSelector") == "held" {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	})
	// Registered after the server's: runs before it closes, which waits
	// for the held list, should the test end early.
	t.Cleanup(func() { release.Do(func() { close(hold) }) })
	client := func(namespace string) dynamic.Interface {
		_, watchDyn := remoteClientsIn(t, srv, g, namespace)
		return watchDyn
	}
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	list := func(c dynamic.Interface, selector string) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := c.Resource(cms).Namespace("ns").List(t.Context(), metav1.ListOptions{LabelSelector: selector})
			done <- err
		}()
		return done
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return cond(), nil
		}); err != nil {
			t.Fatalf("%s: %v (lists at the server: %d)", what, err, inFlight.Load())
		}
	}
	a1, a2, b := client("team-a"), client("team-a"), client("team-b")
	held := list(a1, "held")
	until("team a's first list never reached the server", func() bool { return inFlight.Load() == 1 })
	waiting := list(a2, "")
	until("team a's second list did not wait for the first", func() bool { return g.listSlot("team-a").waiting.Load() == 1 })
	// Another namespace's list does not wait for team a's.
	if err := <-list(b, ""); err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m != 2 {
		t.Fatalf("%d lists were read at once; want 2 (team a's first and team b's)", m)
	}
	release.Do(func() { close(hold) })
	for _, done := range []<-chan error{held, waiting} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// An answer to a request is bounded in values too, since each worker may
// be decoding one; discovery documents, decoded into fixed structs, may
// hold more.
func TestRemoteAnswerOfTinyValuesIsRefused(t *testing.T) {
	values := func(kind, apiVersion string, n int) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"kind":%q,"apiVersion":%q,"metadata":{"name":"a","namespace":"ns"},"data":{"k":[`, kind, apiVersion)
			io.WriteString(w, strings.TrimSuffix(strings.Repeat("{},", n), ","))
			io.WriteString(w, `]}}`)
		}
	}
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	srv := hostileServer(t, values("ConfigMap", "v1", 2*maxAnswerValues))
	cc, _, allocated := clientsFor(t, srv, 64<<20)
	_, err := cc.client.Resource(cms).Namespace("ns").Get(t.Context(), "a", metav1.GetOptions{})
	want := fmt.Sprintf("sent an answer over %d JSON values", maxAnswerValues)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want one saying %q", err, want)
	}
	if alloc := allocated(); alloc > 16<<20 {
		t.Errorf("refusing an answer of %d values allocated %d MiB", 2*maxAnswerValues, alloc>>20)
	}

	n := (maxAnswerValues + maxDiscoveryValues) / 4 // {} and its comma: two values each
	srv = hostileServer(t, values("APIResourceList", "v1", n))
	cc, _, _ = clientsFor(t, srv, 64<<20)
	if err := cc.probe.Get().AbsPath("/api/v1").Do(t.Context()).Error(); err != nil {
		t.Errorf("a discovery document of %d values: %v", 2*n, err)
	}
}

// An answer about an object Vidra declares (AnswersAbout) is bounded by
// the object's size: each worker may be holding one, and a tenant's server
// answers with as much as Vidra reads. Other answers keep the limits of
// any answer.
func TestRemoteAnswerAboutAnObjectIsBoundedByIt(t *testing.T) {
	var entries, size atomic.Int64
	srv := hostileServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns"},"data":{`)
		value := strings.Repeat("v", int(size.Load()))
		for i := range entries.Load() {
			if i > 0 {
				io.WriteString(w, ",")
			}
			fmt.Fprintf(w, `"k%d":%q`, i, value)
		}
		io.WriteString(w, `}}`)
	})
	declared := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "ns"},
		"data":     map[string]any{"k": "v"},
	}}
	about := AnswersAbout(t.Context(), declared, 0)
	cc, _, _ := clientsFor(t, srv, maxAnswerBytes)
	get := func(ctx context.Context) error {
		_, err := cc.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Get(ctx, "a", metav1.GetOptions{})
		return err
	}
	steps := []struct {
		name          string
		entries, size int64
		about         bool
		want          string
	}{
		{"an answer of a real server's size", 50, 100, true, ""},
		{"2 MiB about a small object", 2, 1 << 20, true, "sent an answer about ConfigMap ns/a over 1025 KiB"},
		{"40,000 values about a small object", 40_000, 0, true, "sent an answer about ConfigMap ns/a over 20"},
		{"2 MiB about no object in particular", 2, 1 << 20, false, ""},
		{"40,000 values about no object in particular", 40_000, 0, false, ""},
	}
	for _, s := range steps {
		entries.Store(s.entries)
		size.Store(s.size)
		ctx := t.Context()
		if s.about {
			ctx = about
		}
		err := get(ctx)
		if cc.breaker.isOpen() {
			// A refused answer fails its request, not the server.
			t.Errorf("%s: the breaker opened", s.name)
		}
		switch {
		case s.want == "" && err != nil:
			t.Errorf("%s: %v", s.name, err)
		case s.want != "" && (err == nil || !strings.Contains(err.Error(), s.want) || !strings.Contains(err.Error(), "far beyond its manifest")):
			t.Errorf("%s: err = %v; want one saying %q", s.name, err, s.want)
		}
	}

	// The clusters of the operator's own namespace, whose Secrets only
	// administrators write, are not bounded so.
	entries.Store(2)
	size.Store(1 << 20)
	own, _ := remoteClientsIn(t, srv, guard(t, Guard{}), testOperatorNamespace)
	if _, err := own.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Get(about, "a", metav1.GetOptions{}); err != nil {
		t.Errorf("2 MiB about a small object, on a cluster of the operator's namespace: %v", err)
	}
}

// The RESTMappers of a namespace's remote clusters share a bound on the
// discovery they hold: each maps every resource its cluster serves, and a
// tenant names as many clusters as it has Secrets. Five clusters of a
// server serving 28,000 resources held 309 MiB.
func TestRemoteDiscoveryOfANamespaceIsBounded(t *testing.T) {
	const resources = 28_000 // 140,000 values, under the bound of one document
	srv := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api":
			io.WriteString(w, `{"kind":"APIVersions","apiVersion":"v1","versions":["v1"]}`)
		case "/apis":
			io.WriteString(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"h.example","versions":[{"groupVersion":"h.example/v1","version":"v1"}],"preferredVersion":{"groupVersion":"h.example/v1","version":"v1"}}]}`)
		case "/api/v1":
			io.WriteString(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[{"name":"configmaps","namespaced":true,"kind":"ConfigMap","verbs":["get"]}]}`)
		case "/apis/h.example/v1":
			resourceList(w, resources)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":404}`)
		}
	})
	g := guard(t, Guard{})
	// Each a cluster of its own, as the Secrets of a tenant would be.
	cluster := func() *clusterClients {
		cc, _ := remoteClientsIn(t, srv, g, "team-a")
		return cc
	}
	kind := schema.GroupVersionKind{Group: "h.example", Version: "v1", Kind: "K5"}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	first := cluster()
	if _, err := first.mapper.Mapping(kind); err != nil {
		t.Fatalf("the first cluster's discovery, under the bound: %v", err)
	}
	var refused []*clusterClients
	for i := range 4 {
		cc := cluster()
		_, err := cc.mapper.Mapping(kind)
		want := "would make the remote clusters of namespace team-a hold more than 150000 JSON values of them"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("cluster %d: err = %v; want one saying %q", i+2, err, want)
		}
		refused = append(refused, cc)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 100<<20 {
		t.Errorf("five clusters' discovery took the heap %d MiB up", grew>>20)
	}
	runtime.KeepAlive(refused)

	// The clusters' clients are dropped: another may hold as much.
	pool := g.discoveryPools["team-a"]
	first.discovery.close()
	for _, cc := range refused {
		cc.discovery.close()
	}
	if n := pool.inUse(); n != 0 {
		t.Fatalf("the pool counts %d values after every cluster was dropped", n)
	}
	if _, err := cluster().mapper.Mapping(kind); err != nil {
		t.Errorf("a cluster's discovery after the first was dropped: %v", err)
	}
	runtime.KeepAlive(first)
}

// A cluster whose discovery document was refused is not asked for
// discovery again for a while: with aggregated discovery the RESTMapper
// would ask for it on every mapping, and have it refused every time. The
// refusal fails the request, not the server.
func TestRemoteRefusedDiscoveryIsNotAskedAgainAtOnce(t *testing.T) {
	var served atomic.Int64
	srv := hostileServer(t, func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		resourceList(w, 1000)
	})
	g := guard(t, Guard{})
	g.discoveryValues = 1000
	acct := g.discoveryAccount("team-a")
	b := newBreaker(srv.URL, clock.RealClock{}, time.Minute)
	cfg := &rest.Config{Host: srv.URL, Dial: g.dial, Proxy: noProxy,
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
		WrapTransport:   transport.Wrappers(g.wrapAnswers(srv.URL, g.discovery, b.fail, nil, acct), b.wrap)}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
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
	if b.isOpen() {
		t.Error("a refused discovery document opened the breaker")
	}
}

// A watch of a tenant's cluster that waits for its pace must not have its
// server's events pile up in the operator: over HTTP/2 a server may send
// 4 MiB a stream ahead of what is read, held in the heap. So the informers
// of a tenant's clusters speak HTTP/1.1, whose streams wait on the
// connection; those of the operator's namespace, which are not paced, keep
// HTTP/2.
func TestTenantWatchesSpeakHTTP1(t *testing.T) {
	var mu sync.Mutex
	protos := map[string]int{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos[r.URL.Query().Get("labelSelector")] = r.ProtoMajor
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	g := guard(t, Guard{})
	for _, ns := range []string{"team-a", testOperatorNamespace} {
		_, c := remoteClientsIn(t, srv, g, ns)
		w, err := c.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Watch(t.Context(), metav1.ListOptions{LabelSelector: "from=" + ns})
		if err != nil {
			t.Fatal(err)
		}
		for range w.ResultChan() {
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := protos["from=team-a"]; got != 1 {
		t.Errorf("a tenant's watch spoke HTTP/%d; want HTTP/1.1", got)
	}
	if got := protos["from="+testOperatorNamespace]; got != 2 {
		t.Errorf("a watch of the operator's namespace spoke HTTP/%d; want HTTP/2", got)
	}
}

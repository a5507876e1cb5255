package destination

import (
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
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
	g.informers.answer, g.informers.event = 4*limit, limit
	r := &remotes{base: &rest.Config{QPS: 100, Burst: 100}, guard: g, clock: clock.RealClock{}}
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	cc, watchDyn, err := r.newRemoteClients(remoteKey{server: srv.URL}, cfg, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	return cc, watchDyn, func() uint64 {
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
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
	if err == nil || !strings.Contains(err.Error(), "sent an answer over 1 MiB") {
		t.Fatalf("err = %v; want an answer over 1 MiB (the list limit)", err)
	}
	if !cc.breaker.isOpen() {
		t.Error("the list over the limit did not open the breaker")
	}
	if alloc := allocated(); alloc > 16<<20 {
		t.Errorf("refusing a 64 MiB list allocated %d MiB", alloc>>20)
	}
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
	w, err := watchDyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Watch(t.Context(), metav1.ListOptions{})
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

// Protobuf watch streams are framed by a length: a frame announcing more
// than the limit ends the stream before any of it is read.
func TestProtobufWatchFrameOverTheLimit(t *testing.T) {
	frame := func(n int) string {
		var h [4]byte
		binary.BigEndian.PutUint32(h[:], uint32(n))
		return string(h[:]) + strings.Repeat("x", min(n, 100))
	}
	g := &answerGuard{server: "https://remote.example", limits: answerLimits{event: 100}}
	var failed error
	g.failed = func(err error) { failed = err }
	stream := frame(100) + frame(0) + frame(100) + frame(101)
	b := &eventLimitBody{body: io.NopCloser(strings.NewReader(stream)), guard: g, protobuf: true}
	read, err := io.ReadAll(b)
	if err == nil || !strings.Contains(err.Error(), "sent a watch event over 100 bytes") || failed != err {
		t.Fatalf("err = %v (failed %v); want a watch event over 100 bytes", err, failed)
	}
	if want := len(stream) - 100 - 1; len(read) != want {
		t.Errorf("read %d bytes; want the %d before the last frame's length ended", len(read), want)
	}
}

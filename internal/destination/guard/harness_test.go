// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// newTest returns the guard of c.
func newTest(t *testing.T, c Config) *Guard {
	t.Helper()
	g, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// testOperatorNamespace is the operator's namespace of clientsIn.
const testOperatorNamespace = "vidra-system"

// testClients are the clients of one remote cluster as the destination
// resolver builds them (internal/destination, newRemoteClients), the
// circuit breaker aside: failures records what would trip it.
type testClients struct {
	// client and probe are the request clients, watch the informers'
	// client, discovery the discovery client.
	client    dynamic.Interface
	probe     rest.Interface
	watch     dynamic.Interface
	discovery discovery.DiscoveryInterface
	cluster   *Cluster
	failures  *failures
}

// clientsIn builds the clients of a remote cluster for srv, under guard g,
// as for a kubeconfig Secret of namespace ns: the clients of a tenant's
// namespace are bounded by its pools, those of testOperatorNamespace are
// not. Each call is a cluster of its own.
func clientsIn(t *testing.T, srv *httptest.Server, g *Guard, ns string) *testClients {
	t.Helper()
	f := &failures{}
	c := g.Own(srv.URL, f.fail)
	if ns != testOperatorNamespace {
		c = g.Tenant(srv.URL, ns, f.fail)
	}
	t.Cleanup(c.Close)
	base := &rest.Config{Host: srv.URL, Dial: g.Dial, Proxy: NoProxy,
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	config := func(wrap transport.WrapperFunc) *rest.Config {
		cfg := rest.CopyConfig(base)
		cfg.WrapTransport = transport.Wrappers(wrap, f.wrap)
		return cfg
	}
	tc := &testClients{cluster: c, failures: f}
	var err error
	if tc.client, err = dynamic.NewForConfig(config(c.Requests)); err != nil {
		t.Fatal(err)
	}
	probe, err := discovery.NewDiscoveryClientForConfig(config(c.Requests))
	if err != nil {
		t.Fatal(err)
	}
	tc.probe = probe.RESTClient()
	watchDyn, err := dynamic.NewForConfig(config(c.Informers))
	if err != nil {
		t.Fatal(err)
	}
	tc.watch = c.Lists(watchDyn)
	if tc.discovery, err = discovery.NewDiscoveryClientForConfig(config(c.Discovery)); err != nil {
		t.Fatal(err)
	}
	return tc
}

// failures records the failures of a cluster's server as its circuit
// breaker counts them: a request's error, unless its caller gave up or the
// answer was refused for what it would make Vidra hold (RefusedAnswer),
// and what the guard reports through failed.
type failures struct {
	mu   sync.Mutex
	errs []error
}

func (f *failures) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, err)
}

// any reports whether the breaker would have opened.
func (f *failures) any() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.errs) > 0
}

func (f *failures) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil && req.Context().Err() == nil && RefusedAnswer(err) == nil {
			f.fail(err)
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// clientsFor builds the clients of a remote cluster of a tenant for srv,
// with the answer limits shrunk to limit so that the tests need not send
// hundreds of MiB.
func clientsFor(t *testing.T, srv *httptest.Server, limit int64) (*testClients, func() (allocated uint64)) {
	t.Helper()
	g := newTest(t, Config{})
	g.requests.answer, g.requests.event = limit, limit
	g.discovery.answer, g.discovery.event = limit, limit
	g.informers.answer, g.informers.event = 4*limit, limit
	c := clientsIn(t, srv, g, "tenant")
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	return c, func() uint64 {
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
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

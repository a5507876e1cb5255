// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vidra-operator/vidra/internal/destination/guard/hostiletest"
)

// A tenant's own "API server" answers discovery with a body far over the
// limit. Vidra reads no more than the limit, fails with an error that says
// so, and opens the server's breaker: the guard's bounds are wired into the
// clients of a remote cluster (internal/destination/guard tests them one by
// one). (A 200 MiB answer once took the heap to 2.5 GiB and the caller 2.5
// minutes.)
func TestRemoteAnswerOverTheLimitIsRefused(t *testing.T) {
	const size = 64 << 20
	srv := hostiletest.Server(t, func(w http.ResponseWriter, _ *http.Request) {
		hostiletest.StreamJSON(w, `{"kind":"APIVersions","versions":["`, `"]}`, size)
	})
	cc, _ := remoteClientsIn(t, srv, newTestGuard(t, Guard{}), "tenant")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := cc.mapper.Mapping(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	want := fmt.Sprintf("the API server at %s sent an answer over 8 MiB", srv.URL)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v; want one saying %q", err, want)
	}
	if !IsUnreachable(err) || !cc.breaker.isOpen() {
		t.Errorf("the answer over the limit did not count as a failure of the server: unreachable %v, breaker open %v", IsUnreachable(err), cc.breaker.isOpen())
	}
	if alloc > 48<<20 {
		t.Errorf("refusing a %d MiB answer allocated %d MiB", size>>20, alloc>>20)
	}
	t.Logf("%d MiB answer, limit 8 MiB: %d MiB allocated; %v", size>>20, alloc>>20, err)
}

// The RESTMappers of a namespace's remote clusters share a bound on the
// discovery they hold: each maps every resource its cluster serves, and a
// tenant names as many clusters as it has Secrets. Five clusters of a
// server serving 28,000 resources held 309 MiB.
func TestRemoteDiscoveryOfANamespaceIsBounded(t *testing.T) {
	const resources = 28_000 // 140,000 values, under the bound of one document
	srv := hostiletest.Server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api":
			io.WriteString(w, `{"kind":"APIVersions","apiVersion":"v1","versions":["v1"]}`)
		case "/apis":
			io.WriteString(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"h.example","versions":[{"groupVersion":"h.example/v1","version":"v1"}],"preferredVersion":{"groupVersion":"h.example/v1","version":"v1"}}]}`)
		case "/api/v1":
			io.WriteString(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[{"name":"configmaps","namespaced":true,"kind":"ConfigMap","verbs":["get"]}]}`)
		case "/apis/h.example/v1":
			hostiletest.ResourceList(w, resources)
		default:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":404}`)
		}
	})
	g := newTestGuard(t, Guard{})
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

	// The clusters' clients are dropped: another may hold as much (the
	// guard's tests check that the pool is then empty).
	first.guarded.Close()
	for _, cc := range refused {
		cc.guarded.Close()
	}
	if _, err := cluster().mapper.Mapping(kind); err != nil {
		t.Errorf("a cluster's discovery after the first was dropped: %v", err)
	}
	runtime.KeepAlive(first)
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
	g := newTestGuard(t, Guard{})
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

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A tenant names any ServiceAccount it likes, as often as it likes: each
// name kept a client of its own for good, and on a remote cluster a
// transport of its own, with its own connections. The clients of the
// ServiceAccounts of a cluster now share the cluster's HTTP client, and at
// most maxImpersonated are kept, the most recently used.
func TestImpersonatingClientsShareConnectionsAndAreBounded(t *testing.T) {
	var conns atomic.Int64
	var mu sync.Mutex
	users := map[string]bool{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		users[r.Header.Get("Impersonate-User")] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"ns","resourceVersion":"1"}}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cc, _ := remoteClientsIn(t, srv, newTestGuard(t, Guard{}), "team-a")

	const used = 50
	for i := range used {
		c, err := cc.as("team-a", fmt.Sprintf("sa-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").Get(t.Context(), "x", metav1.GetOptions{}); err != nil {
			t.Fatalf("get as sa-%d: %v", i, err)
		}
	}
	for i := range used {
		if user := fmt.Sprintf("system:serviceaccount:team-a:sa-%d", i); !users[user] {
			t.Errorf("no request came as %s", user)
		}
	}
	if n := conns.Load(); n > 2 {
		t.Errorf("%d ServiceAccounts, one request each, one at a time, opened %d connections; want them to share one", used, n)
	}

	for i := range maxImpersonated + 100 {
		if _, err := cc.as("team-a", fmt.Sprintf("other-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := cc.impersonated.Len(); n != maxImpersonated {
		t.Errorf("%d clients kept after %d ServiceAccounts; want the %d used last", n, used+maxImpersonated+100, maxImpersonated)
	}
	if _, ok := cc.impersonated.Get(fmt.Sprintf("system:serviceaccount:team-a:other-%d", maxImpersonated+99)); !ok {
		t.Error("the ServiceAccount used last was not kept")
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// A configuration of plain HTTP, without TLS, wrappers or a timeout (a
// local API server's insecure port, a proxy such as kubectl proxy) gets
// client-go's default client, whose transport is nil: impersonating over it
// must still send requests, as the ServiceAccount.
func TestImpersonationOverADefaultHTTPClient(t *testing.T) {
	var mu sync.Mutex
	var users []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		users = append(users, r.Header.Get("Impersonate-User"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","namespace":"team-a"}}`))
	}))
	defer srv.Close()
	cc, err := newClusterClients(LocalCluster, &rest.Config{Host: srv.URL}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	as, err := cc.as("team-a", "deployer")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("team-a").Get(t.Context(), "app", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(users) != 1 || users[0] != "system:serviceaccount:team-a:deployer" {
		t.Errorf("requests impersonated %q, want one as system:serviceaccount:team-a:deployer", users)
	}
}

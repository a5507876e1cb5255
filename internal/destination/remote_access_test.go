// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

// A tenant that lets every ServiceAccount of its namespace read its
// kubeconfig Secret, and names a new ServiceAccount again and again, made
// Vidra remember one more successful check of access each time, for good.
// At most maxAccessChecks are remembered now, the ones used last; one
// forgotten is simply checked again, and no check is trusted for longer
// than accessRecheck.
func TestAccessChecksAreBoundedAndCheckedAgainWhenEvicted(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]int{}
	forbidden := map[string]bool{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user := r.Header.Get("Impersonate-User")
		mu.Lock()
		asked[strings.TrimPrefix(user, "system:serviceaccount:team-a:")]++
		deny := forbidden[user]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/api/v1/namespaces/team-a/secrets/kubeconfig" || user == "" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
			return
		}
		if deny {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"%s may not get secrets"}`, user)
			return
		}
		fmt.Fprint(w, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"kubeconfig","namespace":"team-a","resourceVersion":"1"}}`)
	}))
	t.Cleanup(srv.Close)
	count := func(sa string) int {
		mu.Lock()
		defer mu.Unlock()
		return asked[sa]
	}

	// The operator's own cluster, over TLS as in a Pod.
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	local, err := newClusterClients(LocalCluster, cfg, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	r := newRemotes(Options{Clock: clk}, nil, local)
	meta := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "kubeconfig", ResourceVersion: "1"}}
	check := func(sa string) error {
		t.Helper()
		return r.checkAccess(t.Context(), "team-a", sa, meta)
	}
	kept := func() int {
		t.Helper()
		r.mu.Lock()
		defer r.mu.Unlock()
		if n := len(r.access.index); n != r.access.len() {
			t.Fatalf("%d checks indexed, %d in order", n, r.access.len())
		}
		return r.access.len()
	}

	const named = maxAccessChecks + 100
	for i := range named {
		if err := check(fmt.Sprintf("sa-%d", i)); err != nil {
			t.Fatalf("sa-%d: %v", i, err)
		}
	}
	if n := kept(); n != maxAccessChecks {
		t.Fatalf("%d checks kept after %d ServiceAccounts; want the %d used last", n, named, maxAccessChecks)
	}
	last := fmt.Sprintf("sa-%d", named-1)
	if err := check(last); err != nil || count(last) != 1 {
		t.Fatalf("the ServiceAccount checked last: %v, asked %d times; want it remembered, asked once", err, count(last))
	}
	// sa-0 was forgotten: it is asked about again, and remembered again.
	if err := check("sa-0"); err != nil || count("sa-0") != 2 {
		t.Fatalf("a forgotten ServiceAccount: %v, asked %d times; want it checked again", err, count("sa-0"))
	}
	if err := check("sa-0"); err != nil || count("sa-0") != 2 {
		t.Fatalf("a ServiceAccount checked again: %v, asked %d times; want it remembered", err, count("sa-0"))
	}
	if n := kept(); n != maxAccessChecks {
		t.Fatalf("%d checks kept; want %d", n, maxAccessChecks)
	}

	// A new version of the Secret is checked at once.
	meta.ResourceVersion = "2"
	if err := check("sa-0"); err != nil || count("sa-0") != 3 {
		t.Fatalf("after the Secret changed: %v, asked %d times; want it checked again", err, count("sa-0"))
	}

	// After accessRecheck nothing is trusted, and checks that old, not used
	// since, are dropped as others are made.
	clk.Step(accessRecheck)
	if err := check(last); err != nil || count(last) != 2 {
		t.Fatalf("after %s: %v, asked %d times; want it checked again", accessRecheck, err, count(last))
	}
	if n := kept(); n != 1 {
		t.Errorf("%d checks kept after %s; want only the one made since", n, accessRecheck)
	}

	// A right taken away is not remembered: each use asks again.
	mu.Lock()
	forbidden["system:serviceaccount:team-a:"+last] = true
	mu.Unlock()
	clk.Step(accessRecheck)
	for want := 3; want <= 4; want++ {
		var fe *forbiddenSecretError
		if err := check(last); !errors.As(err, &fe) || count(last) != want {
			t.Fatalf("a right taken away: %v, asked %d times; want Forbidden, asked %d times", err, count(last), want)
		}
	}
	if n := kept(); n != 0 {
		t.Errorf("%d checks kept after the only one failed; want none", n)
	}

	// A deleted Secret takes its checks with it.
	for i := range 3 {
		if err := check(fmt.Sprintf("sa-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	r.secretChanged("team-a", "kubeconfig", false, true)
	if n := kept(); n != 0 {
		t.Errorf("%d checks kept after their Secret was deleted; want none", n)
	}
}

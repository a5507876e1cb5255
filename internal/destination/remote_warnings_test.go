// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/internal/destination/guard/hostiletest"
)

// A tenant's server may answer every request with thousands of Warning
// headers, each of which client-go logs by default: 20,000 log lines of
// the tenant's text per answer. Its warnings are logged once a minute per
// cluster, with the count of those left out.
func TestRemoteWarningsAreLoggedOnceAMinute(t *testing.T) {
	const warnings = 20000
	srv := hostiletest.Server(t, func(w http.ResponseWriter, r *http.Request) {
		for i := range warnings {
			w.Header().Add("Warning", fmt.Sprintf(`299 - "w%d"`, i))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"t"}}`)
	})
	clk := clocktesting.NewFakeClock(time.Now())
	cc, _ := remoteClientsOn(t, srv, newTestGuard(t, Guard{}), "tenant", clk)

	var mu sync.Mutex
	var lines []string
	ctx := klog.NewContext(t.Context(), funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{}))
	get := func() {
		t.Helper()
		if _, err := cc.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("t").Get(ctx, "x", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	logged := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lines)
	}

	get()
	get()
	if got := logged(); len(got) != 1 || !strings.Contains(got[0], `"warning"="w0"`) || !strings.Contains(got[0], srv.URL) {
		t.Fatalf("two answers of %d warnings each logged %d lines, want one naming the server and the first warning: %.300q", warnings, len(got), got)
	}
	clk.Step(warningLogEvery)
	get()
	got := logged()
	if len(got) != 2 || !strings.Contains(got[1], fmt.Sprintf(`"warningsNotLogged"=%d`, 2*warnings-1)) {
		t.Fatalf("a minute later, %d lines, want a second one counting the %d left out: %.300q", len(got), 2*warnings-1, got)
	}
}

// Go reads an answer's headers whole before anything else bounds the
// answer, up to 10 MiB by default. A remote server's headers are bounded
// at 1 MiB: past it the request fails, and nothing more is read.
func TestRemoteAnswerHeadersAreBounded(t *testing.T) {
	srv := hostiletest.Server(t, func(w http.ResponseWriter, r *http.Request) {
		for i := range 3000 {
			w.Header().Add(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("x", 1000))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"t"}}`)
	})
	cc, _ := remoteClientsIn(t, srv, newTestGuard(t, Guard{}), "tenant")
	_, err := cc.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("t").Get(t.Context(), "x", metav1.GetOptions{})
	if err == nil || !strings.Contains(err.Error(), "header") {
		t.Fatalf("an answer with 3 MB of headers: err = %v, want one about its headers", err)
	}
}

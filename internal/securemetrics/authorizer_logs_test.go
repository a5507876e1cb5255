// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package securemetrics

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"golang.org/x/time/rate"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
)

// No token reaches a log line, from the authorizer or from client-go, which
// logs request bodies at verbosity 8, whatever the verbosity and whatever
// the outcome.
func TestTokensAreNeverLogged(t *testing.T) {
	r := newReviewer()
	client := r.server(t)

	var mu sync.Mutex
	var lines []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 10})
	// client-go logs with the logger of a request's context, else klog's.
	klog.SetLoggerWithOptions(logger, klog.ContextualLogger(true))
	defer klog.ClearLogger()

	h := NewAuthorizer(Options{Client: client, Logger: logger}).Wrap(metricsHandler())
	tokens := map[string]int{scraperToken: http.StatusOK, strangerToken: http.StatusForbidden, "made-up-token": http.StatusUnauthorized}
	for token, status := range tokens {
		if w := scrape(h, http.MethodGet, "Bearer "+token); w.Code != status {
			t.Fatalf("status %d, want %d: %s", w.Code, status, w.Body)
		}
	}
	r.set(func(r *reviewer) { r.tokenErr = errors.New("etcd is gone") })
	if w := scrape(h, http.MethodGet, "Bearer token-during-an-outage"); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", w.Code)
	}
	tokens["token-during-an-outage"] = 0

	mu.Lock()
	defer mu.Unlock()
	if len(lines) == 0 {
		t.Fatal("nothing was logged: the check would not see a token")
	}
	for _, line := range lines {
		for token := range tokens {
			if strings.Contains(line, token) {
				t.Errorf("a log line holds a token: %s", line)
			}
		}
	}
}

// countingLogger logs at debug level, counting its lines.
func countingLogger() (klog.Logger, func() int) {
	var mu sync.Mutex
	n := 0
	return funcr.New(func(string, string) {
			mu.Lock()
			defer mu.Unlock()
			n++
		}, funcr.Options{Verbosity: 1}), func() int {
			mu.Lock()
			defer mu.Unlock()
			return n
		}
}

// A client repeating a refused token, or sending new ones, at debug level,
// writes a few log lines, not a line a request.
func TestAFloodOfRefusalsLogsAHandfulOfLines(t *testing.T) {
	for _, tc := range []struct {
		name   string
		token  func(i int) string
		status int
	}{
		{"a token that is not valid, again and again", func(int) string { return "made-up" }, http.StatusUnauthorized},
		{"a token whose identity may not get it, again and again", func(int) string { return strangerToken }, http.StatusForbidden},
		{"a new token that is not valid each time", func(i int) string { return fmt.Sprintf("made-up-%d", i) }, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger, lines := countingLogger()
			h := NewAuthorizer(Options{Client: newReviewer().clientset(), Clock: testingclock.NewFakeClock(t0), Logger: logger}).Wrap(metricsHandler())
			for i := range 1000 {
				if w := scrape(h, http.MethodGet, "Bearer "+tc.token(i)); w.Code != tc.status {
					t.Fatalf("request %d: status %d, want %d", i, w.Code, tc.status)
				}
			}
			if n := lines(); n == 0 || n > 3 {
				t.Errorf("1000 refusals wrote %d log lines, want 1 to 3", n)
			}
		})
	}
}

// Only a refusal a review decided is logged: one from the cache was logged
// when it was reviewed.
func TestRefusalsFromTheCacheAreNotLogged(t *testing.T) {
	logger, lines := countingLogger()
	a := NewAuthorizer(Options{Client: newReviewer().clientset(), Clock: testingclock.NewFakeClock(t0), Logger: logger})
	// Every refusal that may be logged is, so that the count shows which.
	a.refusals = rate.Sometimes{Every: 1}
	h := a.Wrap(metricsHandler())
	for _, token := range []string{"made-up", strangerToken} {
		for range 100 {
			_ = scrape(h, http.MethodGet, "Bearer "+token)
		}
	}
	if n := lines(); n != 2 {
		t.Errorf("2 reviews and 198 refusals from the cache wrote %d log lines, want 2", n)
	}
}

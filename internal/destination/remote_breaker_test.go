// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/internal/destination/guard"
	"github.com/vidra-operator/vidra/internal/destination/guard/hostiletest"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// slowTransport answers 200 after took, on a fake clock, and counts the
// requests that reached it; with a context that ended, it fails as a real
// transport does.
type slowTransport struct {
	clk   *clocktesting.FakeClock
	took  time.Duration
	calls int
}

func (s *slowTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s.calls++
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	s.clk.Step(s.took)
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

func roundTrip(ctx context.Context, rt http.RoundTripper, url string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := rt.RoundTrip(req)
	if resp != nil {
		_ = resp.Body.Close()
	}
	return err
}

func TestBreakerTreatsASlowAnswerAsAFailure(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := newBreaker("https://remote.example", clk, 5*time.Second)
	var tripped, recovered int
	b.onTrip = func() { tripped++ }
	b.onRecover = func() { recovered++ }
	stub := &slowTransport{clk: clk, took: 12 * time.Second}
	rt := b.wrap(stub)

	// The slow answer itself is kept: what it brought is right, only late.
	if err := roundTrip(t.Context(), rt, "https://remote.example/api"); err != nil || tripped != 1 {
		t.Fatalf("slow answer: err %v, tripped %d", err, tripped)
	}
	// Then the server is unavailable, past the cooldown of a connection
	// error too, and the reason names the time and the limit.
	clk.Step(breakerCooldown)
	err := roundTrip(t.Context(), rt, "https://remote.example/apis")
	if !IsUnreachable(err) || stub.calls != 1 || b.check() == nil {
		t.Fatalf("after a slow answer: err %v, calls %d", err, stub.calls)
	}
	for _, want := range []string{"https://remote.example", "answered GET /api after 12s", "slower than 5s as unavailable"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// After the slow cooldown one trial goes through; answered in time, it
	// closes the breaker.
	clk.Step(slowCooldown - breakerCooldown)
	stub.took = time.Millisecond
	if err := roundTrip(t.Context(), rt, "https://remote.example/apis"); err != nil || stub.calls != 2 || recovered != 1 || b.isOpen() {
		t.Fatalf("trial in time: err %v, calls %d, recovered %d, open %v", err, stub.calls, recovered, b.isOpen())
	}
	// A trial answered slowly opens it again, for another slow cooldown.
	stub.took = 6 * time.Second
	if err := roundTrip(t.Context(), rt, "https://remote.example/apis"); err != nil || tripped != 2 {
		t.Fatalf("second slow answer: err %v, tripped %d", err, tripped)
	}
	clk.Step(slowCooldown - time.Millisecond)
	if err := roundTrip(t.Context(), rt, "https://remote.example/apis"); !IsUnreachable(err) || stub.calls != 3 {
		t.Fatalf("within the second cooldown: err %v, calls %d", err, stub.calls)
	}
}

func TestBreakerTimesOnlyWhatWorkersWaitFor(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := newBreaker("https://remote.example", clk, 5*time.Second)
	stub := &slowTransport{clk: clk}
	timed, untimed := b.wrap(stub), b.wrapUntimed(stub)
	cases := []struct {
		name string
		rt   http.RoundTripper
		url  string
		took time.Duration
	}{
		{"an answer just under the limit", timed, "https://remote.example/api", 5*time.Second - time.Millisecond},
		{"a watch, which answers with its headers and then streams", timed, "https://remote.example/api/v1/configmaps?watch=true", time.Minute},
		{"an informer's list of a large cluster", untimed, "https://remote.example/api/v1/configmaps", time.Minute},
	}
	for _, c := range cases {
		stub.took = c.took
		if err := roundTrip(t.Context(), c.rt, c.url); err != nil || b.isOpen() {
			t.Errorf("%s: err %v, open %v", c.name, err, b.isOpen())
		}
	}
}

func TestBreakerIgnoresRequestsCutByTheReconcileDeadline(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := newBreaker("https://remote.example", clk, 5*time.Second)
	stub := &slowTransport{clk: clk}
	rt := b.wrap(stub)
	ctx, cancel := WithReconcileDeadline(t.Context(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	if OutOfTime(ctx) == nil {
		t.Fatalf("OutOfTime(%v) = nil after the deadline", context.Cause(ctx))
	}
	err := roundTrip(ctx, rt, "https://remote.example/api")
	if err == nil || IsUnreachable(err) || b.isOpen() {
		t.Fatalf("request cut by the reconcile's deadline: err %v, open %v", err, b.isOpen())
	}
	// A request's own timeout is the server's failure.
	tctx, tcancel := context.WithTimeout(t.Context(), time.Nanosecond)
	defer tcancel()
	<-tctx.Done()
	if OutOfTime(tctx) != nil {
		t.Fatal("OutOfTime reports a plain timeout")
	}
	if err := roundTrip(tctx, rt, "https://remote.example/api"); !IsUnreachable(err) || !errors.Is(err, context.DeadlineExceeded) || !b.isOpen() {
		t.Fatalf("request's own timeout: err %v, open %v", err, b.isOpen())
	}
}

// A failed certificate check says what to fix without the names the
// server's certificate lists, which would map the services a tenant's
// destination can reach.
func TestUnreachableCertificateErrorsHideTheCertificatesNames(t *testing.T) {
	cert := &x509.Certificate{DNSNames: []string{"billing.internal.svc", "vault.internal.svc"}}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"wrong name", x509.HostnameError{Certificate: cert, Host: "prod.example.com"}, "its TLS certificate is not valid for prod.example.com"},
		{"unknown authority", x509.UnknownAuthorityError{Cert: cert}, "not signed by an authority the kubeconfig trusts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wrapped := &url.Error{Op: "Get", URL: "https://prod.example.com/api", Err: &tls.CertificateVerificationError{Err: tc.err}}
			got := (&unreachableError{server: "https://prod.example.com", err: wrapped}).Error()
			if !strings.Contains(got, tc.want) || strings.Contains(got, "internal.svc") {
				t.Fatalf("message %q: want it to contain %q and no name of the certificate", got, tc.want)
			}
			if errors.Unwrap(&unreachableError{err: wrapped}) != error(wrapped) {
				t.Fatal("the original error is no longer in the chain")
			}
		})
	}
}

// An answer refused for what it would make Vidra hold fails its request,
// not the server; unless it came slowly, which a server trickling answers
// just over their bound would otherwise use to hold a worker per request.
func TestBreakerCountsARefusedAnswerOnlyWhenSlow(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	_, refused := guardErrors(t)
	req, _ := http.NewRequest(http.MethodGet, "https://remote.example/api/v1/namespaces/ns/configmaps/a", nil)

	b := newBreaker("https://remote.example", clk, 5*time.Second)
	b.after(false, req, refused, time.Second, true)
	if b.isOpen() {
		t.Error("a refused answer, quick, opened the breaker")
	}
	b.after(false, req, refused, 6*time.Second, true)
	if !b.isOpen() {
		t.Error("a refused answer that took 6s did not open the breaker")
	} else if err := b.check(); err == nil || !strings.Contains(err.Error(), "after 6s") {
		t.Errorf("the breaker's error: %v; want the slow answer", err)
	}
}

// guardErrors returns two errors of a real guard: an answer over the bound
// of any answer, which fails its server (guard.OverLimit), and one over the
// bound of the object it is about, which fails its request only
// (guard.RefusedAnswer).
func guardErrors(t *testing.T) (overLimit, refused error) {
	t.Helper()
	srv := hostiletest.Server(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(64<<20))
		w.WriteHeader(http.StatusOK)
	})
	c := newTestGuard(t, Guard{}).Tenant(srv.URL, "team-a", nil)
	t.Cleanup(c.Close)
	rt := c.Requests(srv.Client().Transport)
	get := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/namespaces/ns/configmaps/a", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			t.Fatal("an answer of 64 MiB was accepted")
		}
		return err
	}
	overLimit = get(t.Context())
	declared := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "ns"},
	}}
	refused = get(AnswersAbout(t.Context(), declared, 0))
	if guard.OverLimit(overLimit) == nil || RefusedAnswer(overLimit) != nil || RefusedAnswer(refused) == nil {
		t.Fatalf("the guard's errors changed kind: %v; %v", overLimit, refused)
	}
	return overLimit, refused
}

// TestOnlyTheRefusedWatchStopsItsInformer: the informer whose watch the
// pool had no room for sees an error the watch registry stops it for,
// through the breaker's wrapping; the cluster's other requests, failed
// fast by the breaker the pool's error tripped, do not.
func TestOnlyTheRefusedWatchStopsItsInformer(t *testing.T) {
	// A refusal of the registry's, over a limit of the guard's, as the
	// guard's refusedWatch wraps a watch pool's error.
	pool, _ := guardErrors(t)
	refused := &unreachableError{server: "https://tenant.example", err: fmt.Errorf("%w: %w", watchregistry.ErrRefused, pool)}
	if !errors.Is(refused, watchregistry.ErrRefused) {
		t.Errorf("the refused watch's error %q does not match watchregistry.ErrRefused", refused)
	}
	if refused.Error() != pool.Error() {
		t.Errorf("the refused watch's error %q does not say what the pool's does", refused)
	}
	b := newBreaker("https://tenant.example", clock.RealClock{}, 0)
	b.fail(pool)
	if err := b.check(); err == nil || errors.Is(err, watchregistry.ErrRefused) {
		t.Errorf("a request failed fast by the tripped breaker: %v; want a failure that is no refusal of its own", err)
	}
}

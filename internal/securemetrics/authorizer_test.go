// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package securemetrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

func TestRequestsAreAnsweredByTheirReviews(t *testing.T) {
	apiDown := apierrors.NewServiceUnavailable("etcd is gone")
	operatorForbidden := apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", errors.New("no rule"))
	sarForbidden := apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, "", errors.New("no rule"))
	operatorUnauthorized := apierrors.NewUnauthorized("the operator's token has expired")
	for _, tc := range []struct {
		name          string
		method        string
		authorization string
		tokenErr      error
		sarErr        error
		wantStatus    int
		wantBody      string
		wantReviews   int
	}{
		{name: "no token", authorization: "", wantStatus: http.StatusUnauthorized, wantBody: "bearer token"},
		{name: "another scheme", authorization: "Basic dXNlcjpwYXNz", wantStatus: http.StatusUnauthorized},
		{name: "an empty bearer token", authorization: "Bearer   ", wantStatus: http.StatusUnauthorized},
		{name: "a token that is not valid", authorization: "Bearer made-up", wantStatus: http.StatusUnauthorized, wantReviews: 1},
		{name: "allowed", authorization: "Bearer " + scraperToken, wantStatus: http.StatusOK, wantBody: "vidra_reconciles_total 1", wantReviews: 1},
		{name: "allowed, scheme in lower case", authorization: "bearer " + scraperToken, wantStatus: http.StatusOK, wantBody: "vidra_reconciles_total", wantReviews: 1},
		{name: "allowed, HEAD", method: http.MethodHead, authorization: "Bearer " + scraperToken, wantStatus: http.StatusOK, wantReviews: 1},
		{name: "a valid token whose identity may not get it", authorization: "Bearer " + strangerToken, wantStatus: http.StatusForbidden, wantBody: stranger, wantReviews: 1},
		{name: "a method other than get", method: http.MethodPost, authorization: "Bearer " + scraperToken, wantStatus: http.StatusMethodNotAllowed},
		{name: "the TokenReview fails", authorization: "Bearer " + scraperToken, tokenErr: apiDown, wantStatus: http.StatusServiceUnavailable, wantReviews: 1},
		{name: "the SubjectAccessReview fails", authorization: "Bearer " + scraperToken, sarErr: apiDown, wantStatus: http.StatusServiceUnavailable, wantReviews: 1},
		{name: "the operator may not review", authorization: "Bearer " + scraperToken, tokenErr: operatorForbidden, wantStatus: http.StatusInternalServerError, wantReviews: 1},
		{name: "the operator may not review access", authorization: "Bearer " + scraperToken, sarErr: sarForbidden, wantStatus: http.StatusInternalServerError, wantReviews: 1},
		{name: "the operator's credentials are refused", authorization: "Bearer " + scraperToken, tokenErr: operatorUnauthorized, wantStatus: http.StatusInternalServerError, wantReviews: 1},
		{name: "the operator's credentials are refused a review of access", authorization: "Bearer " + scraperToken, sarErr: operatorUnauthorized, wantStatus: http.StatusInternalServerError, wantReviews: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReviewer()
			r.tokenErr, r.sarErr = tc.tokenErr, tc.sarErr
			h := NewAuthorizer(Options{Client: r.clientset(), Clock: testingclock.NewFakeClock(t0)}).Wrap(metricsHandler())
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			w := scrape(h, method, tc.authorization)
			if w.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d; body %q", w.Code, tc.wantStatus, w.Body.String())
			}
			if !strings.Contains(w.Body.String(), tc.wantBody) {
				t.Errorf("body %q lacks %q", w.Body.String(), tc.wantBody)
			}
			if w.Code != http.StatusOK && strings.Contains(w.Body.String(), "vidra_") {
				t.Errorf("a refused request got metrics: %q", w.Body.String())
			}
			if got := r.tokenReviews(); got != tc.wantReviews {
				t.Errorf("%d TokenReviews, want %d", got, tc.wantReviews)
			}
			// A refused client may not keep its connection for another try.
			if got := w.Header().Get("Connection"); (w.Code != http.StatusOK) != (got == "close") {
				t.Errorf("status %d with Connection %q", w.Code, got)
			}
			switch w.Code {
			case http.StatusUnauthorized:
				if w.Header().Get("WWW-Authenticate") == "" {
					t.Error("a 401 without WWW-Authenticate")
				}
			case http.StatusServiceUnavailable:
				if w.Header().Get("Retry-After") == "" {
					t.Error("a 503 without Retry-After")
				}
			}
		})
	}
}

// The SubjectAccessReview asks about the reviewed identity, all of it, and
// about getting the path.
func TestTheAccessReviewAsksForTheTokensIdentity(t *testing.T) {
	r := newReviewer()
	h := NewAuthorizer(Options{Client: r.clientset()}).Wrap(metricsHandler())
	if w := scrape(h, http.MethodGet, "Bearer "+scraperToken); w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if len(r.sars) != 1 {
		t.Fatalf("%d SubjectAccessReviews, want 1", len(r.sars))
	}
	got, user := r.sars[0], r.tokens[scraperToken]
	if got.User != user.Username || got.UID != user.UID || strings.Join(got.Groups, ",") != strings.Join(user.Groups, ",") {
		t.Errorf("review of user %q uid %q groups %v, want %q %q %v", got.User, got.UID, got.Groups, user.Username, user.UID, user.Groups)
	}
	if v := got.Extra["authentication.kubernetes.io/pod-name"]; len(v) != 1 || v[0] != "prometheus-0" {
		t.Errorf("review extra %v, want the token's", got.Extra)
	}
	if got.ResourceAttributes != nil || got.NonResourceAttributes == nil || *got.NonResourceAttributes != (authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}) {
		t.Errorf("review of %+v / %+v, want get of the non-resource URL /metrics", got.ResourceAttributes, got.NonResourceAttributes)
	}
}

// At most MaxReviews reviews run at once; a request past them waits
// QueueWait, then is refused with 503 without reaching the API server.
func TestReviewsInFlightAreBounded(t *testing.T) {
	const maxReviews = 3
	r := newReviewer()
	client := r.clientset()
	release := make(chan struct{})
	// Holds every review until released. The fake clientset runs its
	// reactors one at a time, so the first review waits here and the others
	// behind it: all of them hold their slots.
	client.PrependReactor("create", "tokenreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	clk := testingclock.NewFakeClock(t0)
	a := NewAuthorizer(Options{Client: client, Clock: clk, MaxReviews: maxReviews, QueueWait: time.Second})
	h := a.Wrap(metricsHandler())
	for i := range maxReviews + 1 {
		r.tokens[fmt.Sprintf("token-%d", i)] = authenticationv1.UserInfo{Username: scraper}
	}

	codes := make(chan int, maxReviews)
	for i := range maxReviews {
		go func() { codes <- scrape(h, http.MethodGet, fmt.Sprintf("Bearer token-%d", i)).Code }()
	}
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(a.slots) == maxReviews, nil
	}); err != nil {
		t.Fatalf("%d reviews in flight, want %d", len(a.slots), maxReviews)
	}

	late := make(chan *httptest.ResponseRecorder, 1)
	go func() { late <- scrape(h, http.MethodGet, fmt.Sprintf("Bearer token-%d", maxReviews)) }()
	// The late request waits on the clock for a slot; past QueueWait it
	// gives up.
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return clk.HasWaiters(), nil
	}); err != nil {
		t.Fatal("the request past the bound does not wait for a slot")
	}
	clk.Step(time.Second)
	w := <-late
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("the request past the bound: status %d (Retry-After %q), want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}

	close(release)
	for range maxReviews {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a request within the bound: status %d, want 200", code)
		}
	}
	r.mu.Lock()
	reviewed := append([]string(nil), r.reviewed...)
	r.mu.Unlock()
	if len(reviewed) != maxReviews {
		t.Errorf("%d TokenReviews, want %d: %v", len(reviewed), maxReviews, reviewed)
	}
	for _, token := range reviewed {
		if token == fmt.Sprintf("token-%d", maxReviews) {
			t.Error("the request refused for the bound reached the API server")
		}
	}
	// Every slot was given back.
	if w := scrape(h, http.MethodGet, fmt.Sprintf("Bearer token-%d", maxReviews)); w.Code != http.StatusOK {
		t.Errorf("once the reviews ended: status %d, want 200", w.Code)
	}
}

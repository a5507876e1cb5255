// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package securemetrics

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
)

const (
	scraperToken  = "token-of-the-scraper"
	strangerToken = "token-of-a-stranger"
	scraper       = "system:serviceaccount:monitoring:prometheus"
	stranger      = "system:serviceaccount:team-a:builder"
)

// reviewer is the API server's side of the reviews: the users that tokens
// stand for (a token not in it is not valid), and the users that may get
// /metrics. It answers through a fake clientset's reactors, or over HTTP.
type reviewer struct {
	mu       sync.Mutex
	tokens   map[string]authenticationv1.UserInfo
	allowed  map[string]bool
	tokenErr error
	sarErr   error
	reviewed []string
	sars     []authorizationv1.SubjectAccessReviewSpec
	// holdTokenReviews and holdSARs, when set, receive each answer of
	// their reviews, which waits until the test releases it (see hold).
	holdTokenReviews, holdSARs chan held
	// stop lets every answer held go, when the test ends.
	stop chan struct{}
}

// held is a review the API server decided, whose answer waits until release
// is closed.
type held struct {
	// token is a TokenReview's; user and allowed a SubjectAccessReview's.
	token   string
	user    string
	allowed bool
	release chan struct{}
}

func newReviewer() *reviewer {
	return &reviewer{
		tokens: map[string]authenticationv1.UserInfo{
			scraperToken: {Username: scraper, UID: "uid-1", Groups: []string{"system:serviceaccounts", "system:authenticated"},
				Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}}},
			strangerToken: {Username: stranger, UID: "uid-2", Groups: []string{"system:authenticated"}},
		},
		allowed: map[string]bool{scraper: true},
		stop:    make(chan struct{}),
	}
}

// hold makes the API server decide each review of resource ("tokenreviews"
// or "subjectaccessreviews") at once, as it arrives, but answer only once
// the test releases it: a slow answer, driven step by step. The reviews
// decided are sent on the channel returned.
func (r *reviewer) hold(t *testing.T, resource string) <-chan held {
	ch := make(chan held)
	r.set(func(r *reviewer) {
		if resource == "tokenreviews" {
			r.holdTokenReviews = ch
		} else {
			r.holdSARs = ch
		}
	})
	t.Cleanup(func() {
		select {
		case <-r.stop:
		default:
			close(r.stop)
		}
	})
	return ch
}

// wait holds an answer back, if the test asked for it.
func (r *reviewer) wait(hold chan held, h held) {
	if hold == nil {
		return
	}
	h.release = make(chan struct{})
	select {
	case hold <- h:
	case <-r.stop:
		return
	}
	select {
	case <-h.release:
	case <-r.stop:
	}
}

func (r *reviewer) tokenReview(in *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	r.mu.Lock()
	r.reviewed = append(r.reviewed, in.Spec.Token)
	hold, err := r.holdTokenReviews, r.tokenErr
	out := in.DeepCopy()
	if user, ok := r.tokens[in.Spec.Token]; ok {
		out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: user}
	} else {
		out.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
	}
	r.mu.Unlock()
	r.wait(hold, held{token: in.Spec.Token})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (r *reviewer) subjectAccessReview(in *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
	r.mu.Lock()
	r.sars = append(r.sars, in.Spec)
	hold, err := r.holdSARs, r.sarErr
	out := in.DeepCopy()
	ok := r.allowed[in.Spec.User] && in.Spec.NonResourceAttributes != nil &&
		in.Spec.NonResourceAttributes.Path == "/metrics" && in.Spec.NonResourceAttributes.Verb == "get"
	out.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: ok}
	r.mu.Unlock()
	r.wait(hold, held{user: in.Spec.User, allowed: ok})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// tokenReviews counts the TokenReviews sent.
func (r *reviewer) tokenReviews() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reviewed)
}

func (r *reviewer) set(f func(r *reviewer)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// clientset is a fake clientset whose reviews r answers. It runs one
// reactor at a time: a review held back holds back every other one.
func (r *reviewer) clientset() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		out, err := r.tokenReview(a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview))
		return true, out, err
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		out, err := r.subjectAccessReview(a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview))
		return true, out, err
	})
	return c
}

// server serves r's reviews over HTTP, as the API server does, until the
// test ends, and returns a client of it: requests are then answered
// concurrently, and client-go's request logging runs.
func (r *reviewer) server(t *testing.T) kubernetes.Interface {
	t.Helper()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var out any
		var err error
		switch req.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var in authenticationv1.TokenReview
			if err = json.NewDecoder(req.Body).Decode(&in); err == nil {
				out, err = r.tokenReview(&in)
			}
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var in authorizationv1.SubjectAccessReview
			if err = json.NewDecoder(req.Body).Decode(&in); err == nil {
				out, err = r.subjectAccessReview(&in)
			}
		default:
			http.NotFound(w, req)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(api.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// metricsHandler serves a registry with one of Vidra's metrics.
func metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "vidra_reconciles_total", Help: "Reconciles."})
	c.Inc()
	reg.MustRegister(c)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

func scrape(h http.Handler, method, authorization string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "https://vidra.example/metrics", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// scrapeAsync scrapes on a goroutine of its own; the status comes on the
// channel returned.
func scrapeAsync(h http.Handler, authorization string) <-chan int {
	code := make(chan int, 1)
	go func() { code <- scrape(h, http.MethodGet, authorization).Code }()
	return code
}

// receive waits for what comes on ch, for 30 s at most.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("waited 30 s for %s", what)
		panic("unreachable")
	}
}

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

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

// tokenCase is a token, what the authorizer answers it, and how long it
// keeps that decision.
type tokenCase struct {
	name   string
	token  string
	status int
	ttl    time.Duration
}

var (
	allowedToken   = tokenCase{"allowed", scraperToken, http.StatusOK, DefaultAllowTTL}
	forbiddenToken = tokenCase{"forbidden", strangerToken, http.StatusForbidden, DefaultDenyTTL}
	invalidToken   = tokenCase{"not valid", "made-up", http.StatusUnauthorized, DefaultDenyTTL}
)

func TestDecisionsAreCachedUntilTheyExpire(t *testing.T) {
	for _, tc := range []tokenCase{allowedToken, forbiddenToken, invalidToken} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReviewer()
			clk := testingclock.NewFakeClock(t0)
			h := NewAuthorizer(Options{Client: r.clientset(), Clock: clk}).Wrap(metricsHandler())
			check := func(when string, wantReviews int) {
				t.Helper()
				if w := scrape(h, http.MethodGet, "Bearer "+tc.token); w.Code != tc.status {
					t.Fatalf("%s: status %d, want %d", when, w.Code, tc.status)
				}
				if got := r.tokenReviews(); got != wantReviews {
					t.Fatalf("%s: %d TokenReviews in all, want %d", when, got, wantReviews)
				}
			}
			check("first request", 1)
			check("at once again", 1)
			clk.Step(tc.ttl - time.Second)
			check("just before the decision expires", 1)
			clk.Step(time.Second)
			check("once it expired", 2)
		})
	}
}

// A decision follows the API server's: a binding removed shows once the
// allowed decision expired.
func TestARevokedRightShowsOnceTheDecisionExpired(t *testing.T) {
	r := newReviewer()
	clk := testingclock.NewFakeClock(t0)
	h := NewAuthorizer(Options{Client: r.clientset(), Clock: clk}).Wrap(metricsHandler())
	if w := scrape(h, http.MethodGet, "Bearer "+scraperToken); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	r.set(func(r *reviewer) { delete(r.allowed, scraper) })
	clk.Step(DefaultAllowTTL)
	if w := scrape(h, http.MethodGet, "Bearer "+scraperToken); w.Code != http.StatusForbidden {
		t.Fatalf("after the right was removed and the decision expired: status %d, want 403", w.Code)
	}
}

// Failed reviews are not remembered: the next request asks again.
func TestFailedReviewsAreNotCached(t *testing.T) {
	r := newReviewer()
	r.tokenErr = apierrors.NewServiceUnavailable("etcd is gone")
	h := NewAuthorizer(Options{Client: r.clientset(), Clock: testingclock.NewFakeClock(t0)}).Wrap(metricsHandler())
	if w := scrape(h, http.MethodGet, "Bearer "+scraperToken); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", w.Code)
	}
	r.set(func(r *reviewer) { r.tokenErr = nil })
	if w := scrape(h, http.MethodGet, "Bearer "+scraperToken); w.Code != http.StatusOK {
		t.Fatalf("once the API server answers: status %d, want 200", w.Code)
	}
}

// A flood of made-up tokens keeps the caches at their bound, and does not
// push out the scraper's allowed decision.
func TestTheCachesStayBoundedUnderAFloodOfTokens(t *testing.T) {
	r := newReviewer()
	a := NewAuthorizer(Options{Client: r.clientset(), Clock: testingclock.NewFakeClock(t0)})
	h := a.Wrap(metricsHandler())
	if w := scrape(h, http.MethodGet, "Bearer "+scraperToken); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	const flood = 4 * DefaultCacheSize
	for i := range flood {
		if w := scrape(h, http.MethodGet, fmt.Sprintf("Bearer made-up-%d", i)); w.Code != http.StatusUnauthorized {
			t.Fatalf("made-up token %d: status %d", i, w.Code)
		}
	}
	if a.refused.Len() != DefaultCacheSize {
		t.Errorf("%d refused decisions kept after %d made-up tokens, want the bound %d", a.refused.Len(), flood, DefaultCacheSize)
	}
	before := r.tokenReviews()
	if w := scrape(h, http.MethodGet, "Bearer "+scraperToken); w.Code != http.StatusOK {
		t.Fatalf("the scraper after the flood: status %d", w.Code)
	}
	if r.tokenReviews() != before {
		t.Error("the flood pushed the scraper's decision out of the cache: it was reviewed again")
	}

	// Allowed tokens are bounded too.
	for i := range flood {
		r.set(func(r *reviewer) {
			r.tokens[fmt.Sprintf("allowed-%d", i)] = authenticationv1.UserInfo{Username: scraper}
		})
		if w := scrape(h, http.MethodGet, fmt.Sprintf("Bearer allowed-%d", i)); w.Code != http.StatusOK {
			t.Fatalf("allowed token %d: status %d", i, w.Code)
		}
	}
	if a.allowed.Len() != DefaultCacheSize {
		t.Errorf("%d allowed decisions kept after %d tokens, want the bound %d", a.allowed.Len(), flood, DefaultCacheSize)
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

// A decision is as old as its reviews' start, when the API server had not
// answered yet: a slow answer does not lengthen how long it is reused, nor,
// for a permission, how long a right removed meanwhile still lets in.
func TestADecisionAgesFromTheStartOfItsReviews(t *testing.T) {
	for _, tc := range []tokenCase{allowedToken, forbiddenToken} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReviewer()
			tokenReviews, sars := r.hold(t, "tokenreviews"), r.hold(t, "subjectaccessreviews")
			clk := testingclock.NewFakeClock(t0)
			h := NewAuthorizer(Options{Client: r.clientset(), Clock: clk, ReviewTimeout: time.Minute}).Wrap(metricsHandler())
			code := scrapeAsync(h, "Bearer "+tc.token)
			// Each review answers 2 s after it was asked.
			review := receive(t, tokenReviews, "the TokenReview")
			clk.Step(2 * time.Second)
			close(review.release)
			review = receive(t, sars, "the SubjectAccessReview")
			clk.Step(2 * time.Second)
			close(review.release)
			if got := receive(t, code, "the answer"); got != tc.status {
				t.Fatalf("status %d, want %d", got, tc.status)
			}
			r.set(func(r *reviewer) { r.holdTokenReviews, r.holdSARs = nil, nil })

			clk.SetTime(t0.Add(tc.ttl - time.Nanosecond))
			if w := scrape(h, http.MethodGet, "Bearer "+tc.token); w.Code != tc.status || r.tokenReviews() != 1 {
				t.Fatalf("just before the TTL since the reviews started: status %d, %d TokenReviews in all; want %d from the cache", w.Code, r.tokenReviews(), tc.status)
			}
			clk.SetTime(t0.Add(tc.ttl))
			if w := scrape(h, http.MethodGet, "Bearer "+tc.token); w.Code != tc.status || r.tokenReviews() != 2 {
				t.Fatalf("the TTL after the reviews started: status %d, %d TokenReviews in all; want %d from a new review", w.Code, r.tokenReviews(), tc.status)
			}
		})
	}
}

// Two requests with one token that find no decision are each reviewed. The
// right changes between the two reviews; whichever answers last, the cache
// keeps the decision of the later one, and in one cache only.
func TestAnEarlierReviewNeverReplacesALaterOne(t *testing.T) {
	for _, tc := range []struct {
		name string
		// earlierAllowed is the earlier review's answer; the later one
		// answers the opposite.
		earlierAllowed bool
		// earlierAnswersFirst is the order of the answers.
		earlierAnswersFirst bool
	}{
		{"a permission answered late does not replace a later refusal", true, false},
		{"a later refusal replaces a permission", true, true},
		{"a refusal answered late does not replace a later permission", false, false},
		{"a later permission replaces a refusal", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := map[bool]int{true: http.StatusOK, false: http.StatusForbidden}
			r := newReviewer()
			r.allowed[scraper] = tc.earlierAllowed
			// Over HTTP, so that the two reviews run at once.
			client := r.server(t)
			sars := r.hold(t, "subjectaccessreviews")
			clk := testingclock.NewFakeClock(t0)
			a := NewAuthorizer(Options{Client: client, Clock: clk, ReviewTimeout: time.Minute})
			h := a.Wrap(metricsHandler())

			earlierCode := scrapeAsync(h, "Bearer "+scraperToken)
			earlier := receive(t, sars, "the earlier review")
			r.set(func(r *reviewer) { r.allowed[scraper] = !tc.earlierAllowed })
			clk.Step(time.Second)
			laterCode := scrapeAsync(h, "Bearer "+scraperToken)
			later := receive(t, sars, "the later review")
			if earlier.allowed != tc.earlierAllowed || later.allowed == tc.earlierAllowed {
				t.Fatalf("the reviews decided %t then %t, want %t then the opposite", earlier.allowed, later.allowed, tc.earlierAllowed)
			}
			first, second := later, earlier
			firstCode, secondCode := laterCode, earlierCode
			if tc.earlierAnswersFirst {
				first, second, firstCode, secondCode = earlier, later, earlierCode, laterCode
			}
			close(first.release)
			if got := receive(t, firstCode, "the first answer"); got != status[first.allowed] {
				t.Errorf("the request answered first: status %d, want its review's %d", got, status[first.allowed])
			}
			close(second.release)
			if got := receive(t, secondCode, "the second answer"); got != status[second.allowed] {
				t.Errorf("the request answered second: status %d, want its review's %d", got, status[second.allowed])
			}

			if w := scrape(h, http.MethodGet, "Bearer "+scraperToken); w.Code != status[later.allowed] {
				t.Errorf("a request after both: status %d, want the later review's %d", w.Code, status[later.allowed])
			}
			if got := r.tokenReviews(); got != 2 {
				t.Errorf("%d TokenReviews, want 2: the request after both is answered from the cache", got)
			}
			key := sha256.Sum256([]byte(scraperToken))
			_, inAllowed := a.allowed.Get(key)
			_, inRefused := a.refused.Get(key)
			if inAllowed != later.allowed || inRefused == later.allowed {
				t.Errorf("the token is in the allowed cache: %t, in the refused one: %t; want only the later decision's", inAllowed, inRefused)
			}
		})
	}
}

// A request that waited for a review slot while another with its token was
// reviewed takes that decision, without a review of its own.
func TestAWaitingRequestTakesTheDecisionMadeMeanwhile(t *testing.T) {
	const otherToken = "token-of-another-scraper"
	r := newReviewer()
	r.tokens[otherToken] = authenticationv1.UserInfo{Username: scraper}
	tokenReviews := r.hold(t, "tokenreviews")
	clk := testingclock.NewFakeClock(t0)
	h := NewAuthorizer(Options{Client: r.clientset(), Clock: clk, MaxReviews: 1, ReviewTimeout: time.Minute}).Wrap(metricsHandler())

	otherCode := scrapeAsync(h, "Bearer "+otherToken)
	other := receive(t, tokenReviews, "the review holding the only slot")
	const waiting = 2
	codes := make(chan int, waiting)
	for range waiting {
		go func() { codes <- scrape(h, http.MethodGet, "Bearer "+scraperToken).Code }()
	}
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return clk.Waiters() == waiting, nil
	}); err != nil {
		t.Fatalf("%d requests wait for the slot, want %d", clk.Waiters(), waiting)
	}
	close(other.release)
	if got := receive(t, otherCode, "the other scraper's answer"); got != http.StatusOK {
		t.Fatalf("the other scraper: status %d", got)
	}
	// One of the two waiting gets the slot and is reviewed.
	review := receive(t, tokenReviews, "the review of the waiting requests' token")
	if review.token != scraperToken {
		t.Fatalf("reviewed %q, want the waiting requests' token", review.token)
	}
	close(review.release)
	for range waiting {
		select {
		case code := <-codes:
			if code != http.StatusOK {
				t.Errorf("a waiting request: status %d, want 200", code)
			}
		case again := <-tokenReviews:
			close(again.release)
			t.Fatal("the second waiting request reviewed the token again")
		case <-time.After(30 * time.Second):
			t.Fatal("waited 30 s for the waiting requests")
		}
	}
	if got := r.tokenReviews(); got != 2 {
		t.Errorf("%d TokenReviews, want 2", got)
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

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package securemetrics

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
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

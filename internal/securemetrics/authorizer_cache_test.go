// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package securemetrics

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"
)

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

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// The token reviews go through a client of their own, limited to 20
// requests a second in bursts of 40 (the numbers docs/security.md gives),
// whatever the operator's own limit, which they leave alone.
func TestTheReviewClientHasALimitOfItsOwn(t *testing.T) {
	own := flowcontrol.NewTokenBucketRateLimiter(500, 1000)
	base := &rest.Config{Host: "https://127.0.0.1:6443", QPS: 500, Burst: 1000, RateLimiter: own}
	client, err := newReviewClient(base)
	if err != nil {
		t.Fatal(err)
	}
	limiter := client.AuthenticationV1().RESTClient().GetRateLimiter()
	if limiter == nil || limiter == own {
		t.Fatal("the review client shares the operator's rate limiter")
	}
	if got := client.AuthorizationV1().RESTClient().GetRateLimiter(); got != limiter {
		t.Error("TokenReviews and SubjectAccessReviews have separate limits, not one")
	}
	if got := limiter.QPS(); got != 20 {
		t.Errorf("%v requests a second, want 20", got)
	}
	start := time.Now()
	burst := 0
	for burst <= 100 && limiter.TryAccept() {
		burst++
	}
	// The bucket refills by one every 50 ms while it is emptied.
	if refilled := int(time.Since(start) / (50 * time.Millisecond)); burst < 40 || burst > 40+refilled {
		t.Errorf("a burst of %d requests, want 40", burst)
	}
	if base.QPS != 500 || base.Burst != 1000 || base.RateLimiter != own {
		t.Errorf("the operator's configuration changed: QPS %v, burst %d", base.QPS, base.Burst)
	}
}

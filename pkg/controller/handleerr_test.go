// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/internal/wakequeue"
)

// TestEveryRetryIsRateLimitedAndOnlyKeysWithAnIntervalAreDropped covers the
// requeue decisions after a reconcile: conflicts back off like any error,
// and a key is given up to its interval only when it has one, so that a
// deletion (which has none) is never dropped after the retry cap.
func TestEveryRetryIsRateLimitedAndOnlyKeysWithAnIntervalAreDropped(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "vr"}
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "vidraresources"}, "vr", errors.New("stale"))
	failed := errors.New("cleanup failed")
	for _, tc := range []struct {
		name string
		// failures are the reconciles that failed before this one.
		failures     int
		res          syncResult
		err          error
		wantRequeues int
	}{
		{name: "success forgets the failures", failures: 3, res: syncResult{requeueAfter: time.Minute}, wantRequeues: 0},
		{name: "a conflict backs off", failures: 0, err: conflict, wantRequeues: 1},
		{name: "a conflict past the cap still backs off", failures: 5, err: conflict, wantRequeues: 6},
		{name: "an error backs off", failures: 1, err: failed, wantRequeues: 2},
		{name: "past the cap with an interval: given up until the interval", failures: 5, res: syncResult{requeueAfter: time.Minute, requeueTrigger: TriggerInterval}, err: failed, wantRequeues: 0},
		{name: "past the cap without an interval (a deletion): never dropped", failures: 5, err: failed, wantRequeues: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
			opts := Options{MaxRetries: 5}
			c := &Controller{Wakes: &Wakes{queue: wakequeue.New(wakequeue.Options{Clock: clk}), clock: clk, share: newShare(nil)}, opts: opts}
			defer c.queue.ShutDown()
			for range tc.failures {
				c.queue.Retry(key)
			}
			c.handleErr(t.Context(), key, tc.res, tc.err)
			if got := c.queue.NumRequeues(key); got != tc.wantRequeues {
				t.Errorf("retries recorded = %d, want %d", got, tc.wantRequeues)
			}
		})
	}
}

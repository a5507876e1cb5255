// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"errors"
	"testing"

	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// TestOnlyTheRefusedWatchStopsItsInformer: the informer whose watch the
// pool had no room for sees an error the watch registry stops it for,
// through the breaker's wrapping; the cluster's other requests, failed
// fast by the breaker the pool's error tripped, do not.
func TestOnlyTheRefusedWatchStopsItsInformer(t *testing.T) {
	pool := &watchPoolError{server: "https://tenant.example", namespace: "team-a", max: 16 << 20}
	refused := &unreachableError{server: pool.server, err: &refusedWatch{err: pool}}
	if !errors.Is(refused, watchregistry.ErrRefused) {
		t.Errorf("the refused watch's error %q does not match watchregistry.ErrRefused", refused)
	}
	var p *watchPoolError
	if !errors.As(refused, &p) || refused.Error() != pool.Error() {
		t.Errorf("the refused watch's error %q does not say what the pool's does", refused)
	}
	b := newBreaker(pool.server, clock.RealClock{}, 0)
	b.fail(pool)
	if err := b.check(); err == nil || errors.Is(err, watchregistry.ErrRefused) {
		t.Errorf("a request failed fast by the tripped breaker: %v; want a failure that is no refusal of its own", err)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"errors"
	"testing"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// TestTheRefusedWatchMatchesTheRegistrysRefusal: the error of a watch the
// pool had no room for matches watchregistry.ErrRefused, so that the
// registry stops its informer, and still says what the pool's error says.
// (internal/destination checks that the breaker's wrapping keeps both.)
func TestTheRefusedWatchMatchesTheRegistrysRefusal(t *testing.T) {
	pool := &watchPoolError{server: "https://tenant.example", namespace: "team-a", max: 16 << 20}
	refused := error(&refusedWatch{err: pool})
	if !errors.Is(refused, watchregistry.ErrRefused) {
		t.Errorf("the refused watch's error %q does not match watchregistry.ErrRefused", refused)
	}
	if OverLimit(refused) != error(pool) || refused.Error() != pool.Error() {
		t.Errorf("the refused watch's error %q does not say what the pool's does", refused)
	}
	if RefusedAnswer(pool) != nil {
		t.Error("a watch past its pool counts as a refused answer, which would spare the server's breaker")
	}
}

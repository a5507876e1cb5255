// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"time"
)

// refusedBaseHold is how long Track leaves a ref whose informer its
// cluster's client refused (StateRefused) before it starts a fresh one; it
// doubles with each consecutive refusal, up to Options.RetryMaxDelay. A
// client refuses what it cannot hold now (a bound of open watches, say);
// a retry within the second would be refused again, and an owner that
// tracks its refs at every reconcile would retry at every reconcile.
const refusedBaseHold = 30 * time.Second

// refusedHoldFor returns the hold after the given number of consecutive
// refusals of a ref.
func (r *Registry[K]) refusedHoldFor(refusals int) time.Duration {
	d := refusedBaseHold
	for i := 1; i < refusals && d < r.retryMaxDelay; i++ {
		d *= 2
	}
	return min(d, r.retryMaxDelay)
}

// refusedLocked returns the entry of ref whose informer was refused and
// whose hold has not passed at now, nil if there is none: Track keeps it,
// rather than start a fresh informer.
func (r *Registry[K]) refusedLocked(ref Ref, now time.Time) *entry[K] {
	e := r.bound[ref]
	if e == nil {
		e = r.entries[ref]
	}
	if e == nil || e.state != StateRefused || !now.Before(e.refusedUntil) {
		return nil
	}
	return e
}

// refuseLocked stops an entry its client refused and puts it on hold; it
// returns the hold.
func (r *Registry[K]) refuseLocked(e *entry[K], err error) time.Duration {
	e.stopLocked(StateRefused, &StateError{Ref: e.ref, State: StateRefused, Err: err})
	e.refusals++
	hold := r.refusedHoldFor(e.refusals)
	e.refusedUntil = r.clock.Now().Add(hold)
	return hold
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"context"
	"errors"
	"time"

	"k8s.io/utils/clock"
)

// Start starts the informers of the refs tracked so far and returns: it does
// not block, so the registry fits any manager of long-running components.
// Until ctx is done the registry stops lingering informers once their linger
// has passed, retries failed ones (Options.RetryFailed) and expires stale
// expectations; then it stops every informer, and Done is closed once all
// have exited. It fails if the registry was started before: a registry
// cannot be run twice.
func (r *Registry[K]) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runCtx != nil || r.closed {
		return errors.New("watchregistry: already started")
	}
	r.runCtx = ctx
	for _, e := range r.entries {
		if e.cancel == nil && !e.state.failed() {
			r.startLocked(e)
		}
	}
	go r.loop(ctx)
	r.log.V(1).Info("Watch registry running")
	return nil
}

// Run is the blocking form of Start: it starts the registry and returns once
// ctx is done and every informer has exited. A second call logs an error and
// returns at once.
func (r *Registry[K]) Run(ctx context.Context) {
	if err := r.Start(ctx); err != nil {
		r.log.Error(err, "Run called on a registry that was started before; ignoring")
		return
	}
	<-r.done
}

// Done is closed once a started registry has stopped: its context is done
// and every informer has exited.
func (r *Registry[K]) Done() <-chan struct{} { return r.done }

func (r *Registry[K]) loop(ctx context.Context) {
	defer close(r.done)
	sweep := r.clock.NewTicker(min(r.expectationTTL, lateExpectationTTL))
	defer sweep.Stop()
	for {
		now := r.clock.Now()
		next := earliest(earliest(r.expireIdle(now), r.retryDue(now)), earliest(r.releaseExpiredHolds(now), r.expireHolds(now)))
		var timer clock.Timer
		var timerC <-chan time.Time
		if !next.IsZero() {
			timer = r.clock.NewTimer(next.Sub(now))
			timerC = timer.C()
			// A clock that moved past next since now was read (a fake
			// clock stepped meanwhile) would leave the timer a step
			// late: look again at once instead.
			if later := r.clock.Now(); later.After(now) && !later.Before(next) {
				timer.Stop()
				continue
			}
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			r.shutdown()
			return
		case <-timerC:
		case <-r.kick:
		case <-sweep.C():
			r.resume(r.exp.sweep(r.clock.Now()))
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// earliest returns the earlier of two deadlines, a zero time meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func (r *Registry[K]) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *Registry[K]) shutdown() {
	r.mu.Lock()
	r.closed = true
	for _, e := range r.entries {
		if !e.state.failed() {
			e.stopLocked(StateStopped, nil)
		}
	}
	r.changedLocked()
	r.mu.Unlock()
	// Informer contexts derive from Start's, so they are already cancelled;
	// wait for their goroutines so that nothing outlives Run.
	r.informers.Wait()
	r.log.V(1).Info("Watch registry stopped")
}

// changedLocked wakes the WaitForSync calls: some entry changed state.
func (r *Registry[K]) changedLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// expireIdle stops informers whose linger has passed and returns the next
// linger deadline, or the zero time when none is pending.
func (r *Registry[K]) expireIdle(now time.Time) time.Time {
	var next time.Time
	r.mu.Lock()
	defer r.mu.Unlock()
	for ref, e := range r.entries {
		if len(e.refs) > 0 || e.idleSince.IsZero() {
			continue
		}
		deadline := e.idleSince.Add(r.linger)
		if now.Before(deadline) {
			next = earliest(next, deadline)
			continue
		}
		e.stopLocked(StateStopped, nil)
		delete(r.entries, ref)
		r.changedLocked()
		e.log.V(1).Info("Informer stopped: no owner needed it for the linger period", "linger", r.linger)
	}
	return next
}

// releaseExpiredHolds delivers the events held for writes in flight past
// Options.WriteHold, and returns the next such deadline, or the zero time
// when no event is held.
func (r *Registry[K]) releaseExpiredHolds(now time.Time) time.Time {
	released, next := r.exp.releaseExpired(now)
	if len(released) > 0 {
		r.log.V(1).Info("Writes in flight past the hold; their objects' events are delivered", "events", len(released), "hold", r.writeHold)
	}
	r.resume(released)
	return next
}

// resume handles again, in order, events that were held; callers must not
// hold r.mu.
func (r *Registry[K]) resume(held []func()) {
	for _, fn := range held {
		fn()
	}
}

// retryDue replaces the failed informers whose retry is due with fresh ones
// and returns the next retry deadline, or the zero time when none is
// pending. Only Options.RetryFailed schedules retries.
func (r *Registry[K]) retryDue(now time.Time) time.Time {
	var next time.Time
	changed := false
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return next
	}
	for ref, e := range r.entries {
		if e.retryAt.IsZero() {
			continue
		}
		if h, held := r.heldLocked(ref.Cluster, now); held {
			// Its cluster went over its budget since: no list before the
			// hold ends.
			e.retryAt = h.until
		}
		if !now.Before(e.retryAt) && !r.retryRoomLocked(ref.Cluster) {
			// No room within Options.Informers: another try later.
			e.attempts++
			e.retryAt = now.Add(r.backoff(e.attempts))
		}
		if now.Before(e.retryAt) {
			next = earliest(next, e.retryAt)
			continue
		}
		e.retryAt = time.Time{}
		c, ok := r.clusters[ref.Cluster]
		if !ok || len(e.refs) == 0 {
			// No retry any more: WaitForSync returns the failure now.
			changed = true
			continue
		}
		fresh, err := r.newEntry(ref, c, e)
		if err != nil {
			e.log.Error(err, "Cannot retry the informer")
			changed = true
			continue
		}
		fresh.log.V(1).Info("Retrying informer", "previousState", e.state, "attempt", fresh.attempts)
		r.replaceLocked(e, fresh)
	}
	if changed {
		r.changedLocked()
	}
	return next
}

// backoff returns the delay before the retry that follows the given number
// of consecutive failures: one second, doubling, capped at RetryMaxDelay.
func (r *Registry[K]) backoff(failures int) time.Duration {
	d := retryBaseDelay
	for i := 1; i < failures && d < r.retryMaxDelay; i++ {
		d *= 2
	}
	return min(d, r.retryMaxDelay)
}

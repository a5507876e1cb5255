// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakequeue

import (
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// A change of the health of a resource's objects wakes the resource, and a
// tenant decides how often that happens: its remote API server can change
// an object's condition message as fast as the operator reads its watches
// (1,000 events a second per namespace), and on the cluster Vidra runs in it
// can patch a custom resource's status as fast as the API server lets it.
// Each wake is a reconcile and a write of the whole status (up to 1,000
// inventory entries), and with spec.wait may flip Ready and wake every
// dependent. So the reconciles woken by health are paced per resource:
//
//   - HealthBurst of them run at once, then one every HealthEvery. Five
//     lets the few transitions of an ordinary change show at once, as
//     before (a rollout going InProgress and back to Current, a Pod
//     restarted and ready again, a few objects of the resource doing so
//     together); a second is too short for anyone waiting on Ready to
//     notice, and long enough that a resource whose health keeps changing
//     costs one reconcile and one status write a second, whatever its
//     objects do.
//   - A change of the message alone (a rollout's "Updated: 2/3", or a
//     message a server rewrites for ever) uses none of the burst: it is
//     seen at once after a quiet second, else a second after the last
//     reconcile woken by health, together with every change of that
//     second. A change of status (Current, InProgress, Failed, ...) is
//     seen at once while the burst lasts, and within a second in any case.
//
// Changes inside a wait coalesce: the delaying queue holds one entry per
// key, the earliest asked for. Drift (an object changed or deleted) is not
// paced: it wakes the resource at once, as before.
const (
	HealthEvery = time.Second
	HealthBurst = 5
)

// Pacer decides when the reconcile woken by a change of health runs
// (see HealthEvery), per resource.
type Pacer struct {
	mu   sync.Mutex
	keys map[cache.ObjectName]*pace
	// calls counts wakes, to sweep the keys now and then.
	calls int
}

// pace is the pacing of one resource: a token bucket of HealthBurst,
// one token every HealthEvery, kept as the generic cell rate algorithm's
// theoretical arrival time, and the reconciles asked for.
type pace struct {
	// tat is one HealthEvery past the last token taken, as if every
	// reconcile had taken its token no sooner than the one before's: a
	// reconcile may run at t when t is no earlier than
	// tat-(HealthBurst-1)*HealthEvery.
	tat time.Time
	// last is when the latest reconcile asked for is due, pending the
	// same when it is not due yet (zero otherwise).
	last, pending time.Time
}

// NewPacer returns a Pacer that paces no resource yet.
func NewPacer() *Pacer {
	return &Pacer{keys: map[cache.ObjectName]*pace{}}
}

// Wake records a change of health of one of key's objects at now, of its
// status or only of its message, and returns how long from now the
// reconcile for it is due: zero for at once. A reconcile already asked for
// and not due yet sees the change: its delay is returned again. Asking the
// queue once more for it costs nothing when the queue holds it, and puts it
// back when the queue folded it into an earlier wake of the key (a retry)
// that has run since.
func (p *Pacer) Wake(key cache.ObjectName, statusChanged bool, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sweep(now)
	s := p.keys[key]
	if s == nil {
		s = &pace{}
		p.keys[key] = s
	}
	if !s.pending.After(now) {
		s.pending = time.Time{}
	}
	due := s.tat.Add(-(HealthBurst - 1) * HealthEvery)
	if due.Before(now) {
		due = now
	}
	switch {
	case !s.pending.IsZero() && (!statusChanged || due.After(now)):
		// The reconcile asked for comes within a second: it sees this.
		return s.pending.Sub(now)
	case !s.pending.IsZero():
		// A change of status with a token left: now, besides the
		// reconcile asked for, which keeps its token.
	case !statusChanged:
		if next := s.last.Add(HealthEvery); next.After(due) {
			due = next
		}
	}
	if s.tat.Before(due) {
		s.tat = due
	}
	s.tat = s.tat.Add(HealthEvery)
	if due.After(s.last) {
		s.last = due
	}
	if due.After(now) {
		s.pending = due
	}
	return due.Sub(now)
}

// Forget drops the pacing of a resource that is gone.
func (p *Pacer) Forget(key cache.ObjectName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.keys, key)
}

// sweep drops, every 1024 wakes, the resources whose pacing has run its
// course: nothing asked for, a second since the last reconcile, the bucket
// full. They are paced as if never woken, which is what a missing entry
// does. Called with p.mu held.
func (p *Pacer) sweep(now time.Time) {
	p.calls++
	if p.calls%1024 != 0 {
		return
	}
	for key, s := range p.keys {
		if !s.pending.After(now) && !s.last.Add(HealthEvery).After(now) && !s.tat.After(now) {
			delete(p.keys, key)
		}
	}
}

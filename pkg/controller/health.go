// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/health"
	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// healthSummary is the Healthy condition of an inventory: True when every
// object is Current, else False with Degraded (some Failed) or Progressing,
// naming the objects that are not Current.
type healthSummary struct {
	status  metav1.ConditionStatus
	reason  string
	message string
	// failed is set when an object failed: no wait can fix that.
	failed bool
}

func summarizeHealth(inventory []v1alpha1.ManagedResource) healthSummary {
	var failed, pending []string
	for _, m := range inventory {
		switch health.Status(m.Health) {
		case health.Current:
		case health.Failed:
			failed = append(failed, describeHealth(m))
		default:
			pending = append(pending, describeHealth(m))
		}
	}
	switch {
	case len(failed) > 0:
		return healthSummary{status: metav1.ConditionFalse, reason: v1alpha1.ReasonDegraded, failed: true,
			message: fmt.Sprintf("%s failed: %s", wording.Count(len(failed), "object"), wording.List(append(failed, pending...)))}
	case len(pending) > 0:
		return healthSummary{status: metav1.ConditionFalse, reason: v1alpha1.ReasonProgressing,
			message: fmt.Sprintf("%s not healthy yet: %s", wording.Count(len(pending), "object"), wording.List(pending))}
	}
	return healthSummary{status: metav1.ConditionTrue, reason: v1alpha1.ReasonAllCurrent,
		message: fmt.Sprintf("%s healthy", wording.Count(len(inventory), "object"))}
}

// describeHealth says "Deployment apps/web is InProgress: Available: 0/1".
func describeHealth(m v1alpha1.ManagedResource) string {
	name := m.Name
	if m.Namespace != "" {
		name = m.Namespace + "/" + name
	}
	h := m.Health
	if h == "" {
		h = string(health.Unknown)
	}
	s := m.Kind + " " + name + " is " + h
	if m.HealthMessage != "" {
		s += ": " + m.HealthMessage
	}
	return s
}

// A change of the health of a resource's objects wakes the resource, and a
// tenant decides how often that happens: its remote API server can change
// an object's condition message as fast as the operator reads its watches
// (1,000 events a second per namespace), and on the cluster Vidra runs in it
// can patch a custom resource's status as fast as the API server lets it.
// Each wake is a reconcile and a write of the whole status (up to 1,000
// inventory entries), and with spec.wait may flip Ready and wake every
// dependent. So the reconciles woken by health are paced per resource:
//
//   - healthBurst of them run at once, then one every healthEvery. Five
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
	healthEvery = time.Second
	healthBurst = 5
)

// healthPacer decides when the reconcile woken by a change of health runs
// (see healthEvery), per resource.
type healthPacer struct {
	mu   sync.Mutex
	keys map[cache.ObjectName]*healthPace
	// calls counts wakes, to sweep the keys now and then.
	calls int
}

// healthPace is the pacing of one resource: a token bucket of healthBurst,
// one token every healthEvery, kept as the generic cell rate algorithm's
// theoretical arrival time, and the reconciles asked for.
type healthPace struct {
	// tat is one healthEvery past the last token taken, as if every
	// reconcile had taken its token no sooner than the one before's: a
	// reconcile may run at t when t is no earlier than
	// tat-(healthBurst-1)*healthEvery.
	tat time.Time
	// last is when the latest reconcile asked for is due, pending the
	// same when it is not due yet (zero otherwise).
	last, pending time.Time
}

func newHealthPacer() *healthPacer {
	return &healthPacer{keys: map[cache.ObjectName]*healthPace{}}
}

// wake records a change of health of one of key's objects at now, of its
// status or only of its message, and returns how long from now the
// reconcile for it is due: zero for at once. A reconcile already asked for
// and not due yet sees the change: its delay is returned again. Asking the
// queue once more for it costs nothing when the queue holds it, and puts it
// back when the queue folded it into an earlier wake of the key (a retry)
// that has run since.
func (p *healthPacer) wake(key cache.ObjectName, statusChanged bool, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sweep(now)
	s := p.keys[key]
	if s == nil {
		s = &healthPace{}
		p.keys[key] = s
	}
	if !s.pending.After(now) {
		s.pending = time.Time{}
	}
	due := s.tat.Add(-(healthBurst - 1) * healthEvery)
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
		if next := s.last.Add(healthEvery); next.After(due) {
			due = next
		}
	}
	if s.tat.Before(due) {
		s.tat = due
	}
	s.tat = s.tat.Add(healthEvery)
	if due.After(s.last) {
		s.last = due
	}
	if due.After(now) {
		s.pending = due
	}
	return due.Sub(now)
}

// forget drops the pacing of a resource that is gone.
func (p *healthPacer) forget(key cache.ObjectName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.keys, key)
}

// sweep drops, every 1024 wakes, the resources whose pacing has run its
// course: nothing asked for, a second since the last reconcile, the bucket
// full. They are paced as if never woken, which is what a missing entry
// does. Called with p.mu held.
func (p *healthPacer) sweep(now time.Time) {
	p.calls++
	if p.calls%1024 != 0 {
		return
	}
	for key, s := range p.keys {
		if !s.pending.After(now) && !s.last.Add(healthEvery).After(now) && !s.tat.After(now) {
			delete(p.keys, key)
		}
	}
}

// healthStatusChanged reports whether a change of health of an object
// (watchregistry.EventDigestChanged) changed its status, not only its
// message.
func healthStatusChanged(ev watchregistry.Event) bool {
	if ev.Old == nil || ev.Object == nil {
		return true
	}
	was, _ := health.Of(ev.Old)
	is, _ := health.Of(ev.Object)
	return was != is
}

// healthChanged queues key for a change of health of one of its objects,
// paced (see healthEvery).
func (w *Wakes) healthChanged(key cache.ObjectName, ev watchregistry.Event) {
	d := w.health.wake(key, healthStatusChanged(ev), w.clock.Now())
	if d <= 0 {
		w.enqueue(key, TriggerHealth)
		return
	}
	w.enqueueAfter(key, TriggerHealth, d)
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// expectations remember the owner's own writes and deletes so that their
// watch events are not delivered back to it. They are keyed by object, not by
// Ref: any informer that delivers the object (an all-namespaces one, or a
// namespaced one while a wider informer takes over) recognises the write.
// Each expectation expires: a write whose event never arrives (the object was
// changed again before the watch caught up, or the informer was restarted)
// must not be remembered forever.
//
// A write's resourceVersion is known only once its answer arrives, and the
// watch often delivers the write's event before that. So a write is declared
// before it is sent (beginWrite), and while it is in flight the events of its
// object are held rather than delivered: once the answer is in (endWrite),
// each held event is handled again, the write's own matching its new
// expectation. A held event waits at most until its write's deadline, which
// releaseExpired enforces.
type expectations struct {
	mu sync.Mutex
	m  map[objectKey]*expectation
	// holding holds the objects with held events, so that releaseExpired
	// does not scan every expectation.
	holding map[objectKey]struct{}
	lastID  uint64
}

// objectKey names one object of one cluster, whatever Ref it is seen through.
type objectKey struct {
	cluster         string
	gvr             schema.GroupVersionResource
	namespace, name string
}

func keyOf(ref Ref, namespace, name string) objectKey {
	return objectKey{cluster: ref.Cluster, gvr: ref.GVR, namespace: namespace, name: name}
}

type expectation struct {
	// writes maps resourceVersions to their expectation. A map, because an
	// owner may write the same object twice before the first event arrives.
	writes map[string]pendingWrite
	// deleteUntil is the expiry of an expected delete, zero when none.
	deleteUntil time.Time
	// deleteUID, when known, is the UID of the object expected to go: only
	// its delete matches, so that the delete of an object re-created since
	// (by someone else) is still delivered.
	deleteUID     types.UID
	deleteMatched bool
	// inflight maps the writes declared and not answered yet to the time
	// after which their object's events are no longer held for them.
	inflight map[uint64]time.Time
	// held are the object's events received while a write was in flight,
	// in the order received, each as the handling to resume.
	held []func()
}

type pendingWrite struct {
	until time.Time
	// matched is set once an event consumed the expectation; it is kept for
	// matchedGrace so that a second informer delivering the same version
	// (two overlapping refs during a hand-over) filters it too. A version is
	// delivered at most once per informer, so keeping it cannot hide anyone
	// else's write.
	matched bool
}

// matchedGrace is how long a matched expectation still matches, for the
// other informers that may deliver the same event.
const matchedGrace = 5 * time.Second

func (x *expectations) expectWrite(k objectKey, rv string, until time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.getLocked(k)
	if e.writes == nil {
		e.writes = map[string]pendingWrite{}
	}
	e.writes[rv] = pendingWrite{until: until}
}

func (x *expectations) expectDelete(k objectKey, uid types.UID, until time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.getLocked(k)
	e.deleteUntil, e.deleteUID, e.deleteMatched = until, uid, false
}

// unexpectDelete withdraws the expectation of the delete of uid unless a
// delete event matched it already, and reports whether one did.
func (x *expectations) unexpectDelete(k objectKey, uid types.UID) (seen bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.m[k]
	if e == nil || e.deleteUntil.IsZero() || e.deleteUID != uid {
		return false
	}
	if e.deleteMatched {
		return true
	}
	e.deleteUntil, e.deleteUID = time.Time{}, ""
	x.dropIfEmptyLocked(k, e)
	return false
}

func (x *expectations) getLocked(k objectKey) *expectation {
	if x.m == nil {
		x.m = map[objectKey]*expectation{}
	}
	e := x.m[k]
	if e == nil {
		e = &expectation{}
		x.m[k] = e
	}
	return e
}

// matchWrite reports whether there is an unexpired expectation of a write
// at rv, and marks it matched.
func (x *expectations) matchWrite(k objectKey, rv string, now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.m[k]
	if e == nil {
		return false
	}
	w, ok := e.writes[rv]
	if !ok {
		return false
	}
	if now.After(w.until) {
		delete(e.writes, rv)
		x.dropIfEmptyLocked(k, e)
		return false
	}
	if !w.matched {
		e.writes[rv] = pendingWrite{until: minTime(w.until, now.Add(matchedGrace)), matched: true}
	}
	return true
}

// matchDelete reports whether the delete of the object with uid was
// expected. Without a UID the expectation is consumed at the first match:
// the owner may re-create the object, and somebody else's delete of the new
// one is drift that must be delivered. With one, it matches that object
// only, from any informer, until shortly after its first match.
func (x *expectations) matchDelete(k objectKey, uid types.UID, now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.m[k]
	if e == nil || e.deleteUntil.IsZero() {
		return false
	}
	if now.After(e.deleteUntil) {
		e.deleteUntil, e.deleteUID, e.deleteMatched = time.Time{}, "", false
		x.dropIfEmptyLocked(k, e)
		return false
	}
	if e.deleteUID != "" && uid != "" && uid != e.deleteUID {
		return false
	}
	if e.deleteUID == "" {
		e.deleteUntil = time.Time{}
	} else if !e.deleteMatched {
		e.deleteUntil, e.deleteMatched = minTime(e.deleteUntil, now.Add(matchedGrace)), true
	}
	// Writes expected before the delete can no longer arrive.
	clear(e.writes)
	x.dropIfEmptyLocked(k, e)
	return true
}

func (x *expectations) dropIfEmptyLocked(k objectKey, e *expectation) {
	if len(e.writes) == 0 && e.deleteUntil.IsZero() && len(e.inflight) == 0 && len(e.held) == 0 {
		delete(x.m, k)
	}
}

// beginWrite declares a write of the object about to be sent, whose events
// are held until endWrite or until, and returns the id endWrite takes.
func (x *expectations) beginWrite(k objectKey, until time.Time) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.getLocked(k)
	if e.inflight == nil {
		e.inflight = map[uint64]time.Time{}
	}
	x.lastID++
	e.inflight[x.lastID] = until
	return x.lastID
}

// endWrite ends the write id, answered or failed, and returns the events to
// handle again: those held, once no other write of the object is in flight.
// A write whose hold expired ends with nothing to release.
func (x *expectations) endWrite(k objectKey, id uint64) []func() {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.m[k]
	if e == nil {
		return nil
	}
	if _, ok := e.inflight[id]; !ok {
		return nil
	}
	delete(e.inflight, id)
	return x.releaseLocked(k, e)
}

// hold keeps the handling of an event of the object for later when a write
// of it is in flight, and reports whether it did. Held events are released
// in order, so a later event of the object is held behind them.
func (x *expectations) hold(k objectKey, resume func()) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.m[k]
	if e == nil || len(e.inflight) == 0 {
		return false
	}
	e.held = append(e.held, resume)
	if x.holding == nil {
		x.holding = map[objectKey]struct{}{}
	}
	x.holding[k] = struct{}{}
	return true
}

// releaseLocked returns the held events of an object no write of which is
// in flight any more.
func (x *expectations) releaseLocked(k objectKey, e *expectation) []func() {
	if len(e.inflight) > 0 {
		return nil
	}
	held := e.held
	e.held = nil
	delete(x.holding, k)
	x.dropIfEmptyLocked(k, e)
	return held
}

// expireInflightLocked ends the writes of e whose hold has passed.
func expireInflightLocked(e *expectation, now time.Time) {
	for id, until := range e.inflight {
		if now.After(until) {
			delete(e.inflight, id)
		}
	}
}

// releaseExpired ends the in-flight writes past their deadline that hold
// events back, and returns the events so released, and the next deadline
// of a write holding events (zero when none): a write that never ends, or
// ends late, delays its object's events by the hold at most.
func (x *expectations) releaseExpired(now time.Time) (released []func(), next time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k := range x.holding {
		e := x.m[k]
		expireInflightLocked(e, now)
		released = append(released, x.releaseLocked(k, e)...)
		for _, until := range e.inflight {
			next = earliest(next, until)
		}
	}
	return released, next
}

// sweep drops expired expectations and in-flight writes, and returns the
// events the latter released.
func (x *expectations) sweep(now time.Time) (released []func()) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k, e := range x.m {
		for rv, w := range e.writes {
			if now.After(w.until) {
				delete(e.writes, rv)
			}
		}
		if !e.deleteUntil.IsZero() && now.After(e.deleteUntil) {
			e.deleteUntil, e.deleteUID, e.deleteMatched = time.Time{}, "", false
		}
		expireInflightLocked(e, now)
		released = append(released, x.releaseLocked(k, e)...)
		x.dropIfEmptyLocked(k, e)
	}
	return released
}

// inflightAndHeld counts the writes in flight and the events held.
func (x *expectations) inflightAndHeld() (writes, events int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range x.m {
		writes += len(e.inflight)
		events += len(e.held)
	}
	return writes, events
}

// len counts the expectations no event has matched yet.
func (x *expectations) len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, e := range x.m {
		for _, w := range e.writes {
			if !w.matched {
				n++
			}
		}
		if !e.deleteUntil.IsZero() && !e.deleteMatched {
			n++
		}
	}
	return n
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

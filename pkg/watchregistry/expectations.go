package watchregistry

import (
	"sync"
	"time"
)

// expectations remember the owner's own writes and deletes so that their
// watch events are not delivered back to it. Each expectation expires: a
// write whose event never arrives (the object was changed again before the
// watch caught up, or the informer was restarted) must not be remembered
// forever.
type expectations struct {
	mu sync.Mutex
	m  map[expectationKey]*expectation
}

type expectationKey struct {
	ref             Ref
	namespace, name string
}

type expectation struct {
	// writes maps resourceVersions to their expiry. A map, because an owner
	// may write the same object twice before the first event arrives.
	writes      map[string]time.Time
	deleteUntil time.Time
}

func (x *expectations) expectWrite(k expectationKey, rv string, until time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.getLocked(k)
	if e.writes == nil {
		e.writes = map[string]time.Time{}
	}
	e.writes[rv] = until
}

func (x *expectations) expectDelete(k expectationKey, until time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.getLocked(k).deleteUntil = until
}

func (x *expectations) getLocked(k expectationKey) *expectation {
	if x.m == nil {
		x.m = map[expectationKey]*expectation{}
	}
	e := x.m[k]
	if e == nil {
		e = &expectation{}
		x.m[k] = e
	}
	return e
}

// matchWrite consumes the expectation of a write at rv, reporting whether
// there was an unexpired one.
func (x *expectations) matchWrite(k expectationKey, rv string, now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.m[k]
	if e == nil {
		return false
	}
	until, ok := e.writes[rv]
	if !ok {
		return false
	}
	delete(e.writes, rv)
	x.dropIfEmptyLocked(k, e)
	return !now.After(until)
}

// matchDelete consumes an expected delete. Consumed rather than kept until
// expiry: the owner may re-create the object, and somebody else's delete of
// the new one is drift that must be delivered.
func (x *expectations) matchDelete(k expectationKey, now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.m[k]
	if e == nil || e.deleteUntil.IsZero() {
		return false
	}
	until := e.deleteUntil
	e.deleteUntil = time.Time{}
	// Writes expected before the delete can no longer arrive.
	clear(e.writes)
	x.dropIfEmptyLocked(k, e)
	return !now.After(until)
}

func (x *expectations) dropIfEmptyLocked(k expectationKey, e *expectation) {
	if len(e.writes) == 0 && e.deleteUntil.IsZero() {
		delete(x.m, k)
	}
}

// sweep drops expired expectations.
func (x *expectations) sweep(now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k, e := range x.m {
		for rv, until := range e.writes {
			if now.After(until) {
				delete(e.writes, rv)
			}
		}
		if !e.deleteUntil.IsZero() && now.After(e.deleteUntil) {
			e.deleteUntil = time.Time{}
		}
		x.dropIfEmptyLocked(k, e)
	}
}

func (x *expectations) len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, e := range x.m {
		n += len(e.writes)
		if !e.deleteUntil.IsZero() {
			n++
		}
	}
	return n
}

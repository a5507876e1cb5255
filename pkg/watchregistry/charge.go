// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Charge is how the caches hold one object, as Options.Charge decides it:
// in full or as a stub, and charged to which Budget.
type Charge struct {
	// Stub holds only the object's name, namespace, UID, resourceVersion
	// and the Labels and Annotations named below: reads do not see it
	// (Get fails with an error matching both ErrStub and NotFound, List
	// and Has skip it), and its events are delivered with that metadata
	// only. It is charged to the cluster's Budget, if any.
	Stub bool
	// Budget, when not nil, is charged the bytes of the object held in
	// full instead of the cluster's Budget. When it has no room left for
	// the object (MaxBytes), the object is held as a stub instead, which
	// Budget.Refused counts while it is held. Such a budget never stops an
	// informer: objects past it are only held smaller.
	Budget *Budget
	// Labels and Annotations are the keys a stub keeps, each with a value
	// of at most maxStubValue bytes (longer ones are dropped): what the
	// owners' Map needs of it. Everything else of the object is dropped,
	// so a stub costs a bounded amount whatever the object carries.
	Labels, Annotations []string
}

// ErrStub is matched (errors.Is) by the error of Get of an object of which
// the cache holds only a stub (see Charge): it exists, and must be read
// from the API server. The same error matches apierrors.IsNotFound, so
// that callers that do not know of stubs take it for absent, as before.
var ErrStub = errors.New("the cache holds only a stub of the object")

// maxStubValue bounds each label and annotation value a stub keeps.
const maxStubValue = 512

// markedStub is the cached form of an object held as a stub: its identity
// and the marks c names, packed as an object of apiVersion, kind and that
// metadata, so that events can be delivered with it.
func markedStub(u *unstructured.Unstructured, c Charge) (*packed, error) {
	md := map[string]any{"name": u.GetName()}
	if ns := u.GetNamespace(); ns != "" {
		md["namespace"] = ns
	}
	if uid := u.GetUID(); uid != "" {
		md["uid"] = string(uid)
	}
	if rv := u.GetResourceVersion(); rv != "" {
		md["resourceVersion"] = rv
	}
	if l := pick(u.GetLabels(), c.Labels); l != nil {
		md["labels"] = l
	}
	if a := pick(u.GetAnnotations(), c.Annotations); a != nil {
		md["annotations"] = a
	}
	s := &unstructured.Unstructured{Object: map[string]any{"metadata": md}}
	s.SetAPIVersion(u.GetAPIVersion())
	s.SetKind(u.GetKind())
	p, err := pack(s)
	if err != nil {
		return nil, fmt.Errorf("stub of %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	p.stub = true
	return p, nil
}

// pick returns the entries of m under keys whose values fit a stub, nil
// when there are none.
func pick(m map[string]string, keys []string) map[string]any {
	var out map[string]any
	for _, k := range keys {
		v, ok := m[k]
		if !ok || len(v) > maxStubValue {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		out[k] = v
	}
	return out
}

// ledger holds the bytes an entry's transform set aside on Budgets for
// objects on their way to the cache: a transform runs as an object is
// received, its handler when the informer's queue hands it over, and a
// list hands every object to the transform before the handler charges the
// first. Without the reservation every object of a list would find the
// budget as empty as before it. The handler releases an object's
// reservation when it charges it (account.add, account.remove); what the
// handler never sees (an informer stopped with objects queued) is released
// when the entry stops.
type ledger struct {
	mu     sync.Mutex
	closed bool
	held   map[*Budget]int64
}

func newLedger() *ledger { return &ledger{held: map[*Budget]int64{}} }

// reserve sets n bytes aside on b for p, when b has room for them next to
// what it holds and what is set aside, and reports whether it did.
func (l *ledger) reserve(b *Budget, p *packed, n int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || !b.room(n) {
		return false
	}
	b.pending.Add(n)
	l.held[b] += n
	p.reserved = n
	return true
}

// settle releases the reservation of p, which the handler is charging now.
func (l *ledger) settle(p *packed) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.reserved == 0 || p.budget == nil {
		return
	}
	if !l.closed {
		p.budget.pending.Add(-p.reserved)
		l.held[p.budget] -= p.reserved
	}
	p.reserved = 0
}

// close releases everything still reserved: the entry has stopped.
func (l *ledger) close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	for b, n := range l.held {
		b.pending.Add(-n)
	}
	l.held = nil
}

// charged decides how the transform of e holds u, which Keep kept: in
// full (nil, nil: pack it, then reserveFor), or the stub to hold instead.
func (r *Registry[K]) charged(e *entry[K], u *unstructured.Unstructured) (Charge, *packed, error) {
	if r.charge == nil {
		return Charge{}, nil, nil
	}
	c := r.charge(e.ref, u)
	if !c.Stub {
		return c, nil, nil
	}
	p, err := markedStub(u, c)
	return c, p, err
}

// reserveFor charges p, packed in full, to c.Budget, or returns the stub to
// hold instead when the budget has no room for it.
func (e *entry[K]) reserveFor(c Charge, u *unstructured.Unstructured, p *packed) (*packed, error) {
	if c.Budget == nil {
		return p, nil
	}
	if e.ledger.reserve(c.Budget, p, cachedSize(p)) {
		p.budget = c.Budget
		return p, nil
	}
	s, err := markedStub(u, c)
	if err != nil {
		return nil, err
	}
	s.refusedBy = c.Budget
	return s, nil
}

// stubSource keeps, of an object charged to a Budget, what its stub would
// hold should the budget have no room for it: the packing takes u apart.
func stubSource(u *unstructured.Unstructured, c Charge) *unstructured.Unstructured {
	s := &unstructured.Unstructured{Object: map[string]any{}}
	s.SetAPIVersion(u.GetAPIVersion())
	s.SetKind(u.GetKind())
	s.SetName(u.GetName())
	s.SetNamespace(u.GetNamespace())
	s.SetUID(u.GetUID())
	s.SetResourceVersion(u.GetResourceVersion())
	if l := pick(u.GetLabels(), c.Labels); l != nil {
		s.SetLabels(toStrings(l))
	}
	if a := pick(u.GetAnnotations(), c.Annotations); a != nil {
		s.SetAnnotations(toStrings(a))
	}
	return s
}

func toStrings(m map[string]any) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k], _ = v.(string)
	}
	return out
}

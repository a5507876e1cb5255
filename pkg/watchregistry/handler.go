// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// handler receives the informer's notifications, one at a time per entry,
// and filters them; it holds no registry lock while calling Map or Enqueue.
type handler[K comparable] struct {
	r *Registry[K]
	e *entry[K]
	p *part[K]
}

// aside reports whether the part's event is not for delivery: one of a
// prepared selector, whose owners it notes to wake once the selector joins
// the scope, or one of a prepared informer no longer wanted.
func (h *handler[K]) aside(obj any) bool {
	p := h.p
	if p.dropped.Load() {
		return true
	}
	if !p.prepared.Load() {
		return false
	}
	var keys []K
	if pk, ok := obj.(*packed); ok && !pk.rejected {
		if u, ok := h.e.unpack(pk); ok {
			// Map is the owners' code, which may call the registry: never
			// under initMu.
			keys = h.r.mapFn(Event{Ref: h.e.ref, Type: EventInitialList, Object: u})
		}
	}
	e := h.e
	e.initMu.Lock()
	defer e.initMu.Unlock()
	if !p.prepared.Load() {
		// Joined the scope meanwhile: delivered as any other event.
		return false
	}
	if len(keys) > 0 && p.wake == nil {
		p.wake = map[K]struct{}{}
	}
	for _, k := range keys {
		p.wake[k] = struct{}{}
	}
	return true
}

func (h *handler[K]) OnAdd(obj any, isInInitialList bool) {
	// Charged first, whatever the object: a rejected stub or the object of
	// a prepared selector takes memory too. A cluster without a budget pays
	// one nil check.
	if a := h.p.acct; a != nil {
		if handle, over := a.add(obj); !handle {
			if over {
				h.overBudget()
			}
			return
		}
	}
	p, ok := obj.(*packed)
	if !ok || h.aside(obj) {
		return
	}
	r, e := h.r, h.e
	e.objects.Add(1)
	if p.rejected {
		r.stats.filtered[filterIndex(FilterRejected)].Add(1)
		return
	}
	if isInInitialList {
		r.stats.received[eventTypeIndex(EventInitialList)].Add(1)
		e.collectInitial(r, p)
		return
	}
	r.stats.received[eventTypeIndex(EventAdded)].Add(1)
	h.added(p)
}

// overBudget has the cluster's informers stopped, from a goroutine of its
// own (see Registry.overBudget); account.add claimed the trip, so no other
// goroutine is doing it already.
func (h *handler[K]) overBudget() {
	c := h.e.clients
	// The informer this handler belongs to runs under r.informers, so the
	// group's count is not zero here and Run waits for this goroutine too.
	h.r.informers.Go(func() { h.r.overBudget(c) })
}

// added handles an add, now or once the write in flight that held it has
// ended.
func (h *handler[K]) added(p *packed) {
	r, e := h.r, h.e
	k := keyOf(e.ref, p.Namespace, p.Name)
	if r.hold(k, func() { h.added(p) }) {
		return
	}
	// An object only the owners' manager wrote is their own creation,
	// whether or not its ExpectWrite came before the event.
	if r.exp.matchWrite(k, p.ResourceVersion, r.clock.Now()) || p.ownerWrote {
		r.stats.filtered[filterIndex(FilterOwnWrite)].Add(1)
		return
	}
	u, ok := e.unpack(p)
	if !ok {
		return
	}
	r.deliver(e, Event{Ref: e.ref, Type: EventAdded, Object: u}, p.received)
}

// hold keeps an event of an object a write of which is in flight for when
// the write ends (see BeginWrite), and reports whether it did.
func (r *Registry[K]) hold(k objectKey, resume func()) bool {
	if !r.exp.hold(k, resume) {
		return false
	}
	r.stats.held.Add(1)
	// The loop releases the event should the write outlast its hold.
	r.wake()
	return true
}

// collectInitial maps an object of the initial list to its owners instead of
// delivering it, so that a list of thousands of objects wakes each owner
// once.
func (e *entry[K]) collectInitial(r *Registry[K], p *packed) {
	// The owner may have written the object just before the informer
	// started; the coalesced event covers that write.
	r.exp.matchWrite(keyOf(e.ref, p.Namespace, p.Name), p.ResourceVersion, r.clock.Now())
	u, ok := e.unpack(p)
	if !ok {
		return
	}
	keys := r.mapFn(Event{Ref: e.ref, Type: EventInitialList, Object: u})
	if len(keys) == 0 {
		return
	}
	e.initMu.Lock()
	defer e.initMu.Unlock()
	e.addInitKeysLocked(keys)
}

func (h *handler[K]) OnUpdate(oldObj, newObj any) {
	// An update may grow an object: its new size is charged.
	if a := h.p.acct; a != nil {
		if handle, over := a.add(newObj); !handle {
			if over {
				h.overBudget()
			}
			return
		}
	}
	o, ok1 := oldObj.(*packed)
	n, ok2 := newObj.(*packed)
	if !ok1 || !ok2 || h.aside(newObj) {
		return
	}
	r := h.r
	r.stats.received[eventTypeIndex(EventUpdated)].Add(1)
	if o.ResourceVersion == n.ResourceVersion {
		r.stats.filtered[filterIndex(FilterResync)].Add(1)
		return
	}
	if o.rejected && n.rejected {
		r.stats.filtered[filterIndex(FilterRejected)].Add(1)
		return
	}
	h.updated(o, n)
}

// updated handles an update, now or once the write in flight that held it
// has ended.
func (h *handler[K]) updated(o, n *packed) {
	r, e := h.r, h.e
	k := keyOf(e.ref, n.Namespace, n.Name)
	if r.hold(k, func() { h.updated(o, n) }) {
		return
	}
	switch {
	case n.rejected:
		// Out of the owners' sight from now on, as if deleted: its owner
		// may want it back.
		if u, ok := e.unpack(o); ok {
			r.deliver(e, Event{Ref: e.ref, Type: EventDeleted, Object: u}, n.received)
		}
		return
	case o.rejected:
		if r.exp.matchWrite(k, n.ResourceVersion, r.clock.Now()) {
			r.stats.filtered[filterIndex(FilterOwnWrite)].Add(1)
			return
		}
		if u, ok := e.unpack(n); ok {
			r.deliver(e, Event{Ref: e.ref, Type: EventAdded, Object: u}, n.received)
		}
		return
	}
	// Own writes first, so that an expectation is consumed even when the
	// write also looks status-only.
	if r.exp.matchWrite(k, n.ResourceVersion, r.clock.Now()) {
		r.stats.filtered[filterIndex(FilterOwnWrite)].Add(1)
		return
	}
	typ := EventUpdated
	if !r.deliverStatusOnly && r.statusOnly(o, n) {
		// Status churn wakes nobody, unless it moves the condition the
		// owners wait on.
		if r.wakeDigest == nil || o.digest == n.digest {
			r.stats.filtered[filterIndex(FilterStatusOnly)].Add(1)
			return
		}
		typ = EventDigestChanged
	}
	nu, ok1 := e.unpack(n)
	ou, ok2 := e.unpack(o)
	if !ok1 || !ok2 {
		return
	}
	r.deliver(e, Event{Ref: e.ref, Type: typ, Object: nu, Old: ou}, n.received)
}

// statusOnly applies the status-only filter. A metadata-only object without
// a generation (ConfigMap, Secret) changed something we cannot see, so its
// update is never called status-only.
func (r *Registry[K]) statusOnly(o, n *packed) bool {
	// A stub shows nothing of what changed.
	if o.stub || n.stub {
		return false
	}
	if r.metadataOnly && n.Generation == 0 {
		return false
	}
	return onlyStatusChanged(o, n, !r.metadataOnly)
}

func (h *handler[K]) OnDelete(obj any) {
	// A tombstone's object is the cached one, received long ago: no lag to
	// measure.
	tombstone := false
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, tombstone = t.Obj, true
	}
	// client-go hands over the deletes of names its cache never held (a
	// watch event of an unknown name, which a hostile API server can send
	// at will): they must not take the count down. The account knows what
	// was cached; without one, the count at least never goes below zero.
	held := true
	if a := h.p.acct; a != nil {
		held = a.remove(obj)
	}
	p, ok := obj.(*packed)
	if !ok || h.aside(obj) {
		return
	}
	r, e := h.r, h.e
	if held {
		e.uncount()
	}
	r.stats.received[eventTypeIndex(EventDeleted)].Add(1)
	if p.rejected {
		r.stats.filtered[filterIndex(FilterRejected)].Add(1)
		return
	}
	h.deleted(p, tombstone)
}

// deleted handles a delete, now or once the write in flight that held it
// has ended.
func (h *handler[K]) deleted(p *packed, tombstone bool) {
	r, e := h.r, h.e
	k := keyOf(e.ref, p.Namespace, p.Name)
	if r.hold(k, func() { h.deleted(p, tombstone) }) {
		return
	}
	now := r.clock.Now()
	// A write that takes the object out of the label selector reaches the
	// watch as a delete at the write's version; a tombstone carries the
	// cached version instead, which an own write may have produced before
	// the object's real, unseen delete.
	if r.exp.matchDelete(k, p.UID, now) || (!tombstone && r.exp.matchWrite(k, p.ResourceVersion, now)) {
		r.stats.filtered[filterIndex(FilterOwnWrite)].Add(1)
		return
	}
	u, ok := e.unpack(p)
	if !ok {
		return
	}
	received := p.received
	if tombstone {
		received = 0
	}
	r.deliver(e, Event{Ref: e.ref, Type: EventDeleted, Object: u}, received)
}

// unpack decodes a cached object for an event. It cannot fail on what pack
// wrote; should it, the event is logged and dropped rather than delivered
// without its object, and the owner's periodic reconcile catches up.
func (e *entry[K]) unpack(p *packed) (*unstructured.Unstructured, bool) {
	u, err := p.unpack()
	if err != nil {
		e.log.Error(err, "Cannot decode a cached object; event dropped")
		return nil, false
	}
	return u, true
}

// deliver maps the event to its owners and enqueues them. received is when
// the reflector received the event (see packed.received), zero when unknown.
func (r *Registry[K]) deliver(e *entry[K], ev Event, received time.Duration) {
	if e.stopped.Load() {
		return
	}
	keys := r.mapFn(ev)
	if len(keys) == 0 {
		r.stats.filtered[filterIndex(FilterUnmapped)].Add(1)
		return
	}
	if received > 0 {
		r.metrics.handlerLag.Observe((r.clock.Since(r.epoch) - received).Seconds())
	}
	for _, k := range keys {
		r.enqueue(k, ev)
	}
	r.stats.delivered[eventTypeIndex(ev.Type)].Add(uint64(len(keys)))
}

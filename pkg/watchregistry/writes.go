// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BeginWrite declares the owner's own create, update, patch or apply of
// obj (its namespace and name are read) through ref, about to be sent; call
// it right before the request and end the returned Write with Done and the
// API server's answer, or with Abort when the request failed. The watch
// often delivers a write's event before its answer reaches the writer, when
// ExpectWrite would come too late: while the write is in flight, every event
// of the object is held, and once it has ended, the event of the version it
// produced is filtered as own-write and any other is delivered. An event is
// held for Options.WriteHold at most. Holding costs nothing but a map entry:
// no goroutine, no timer per write. A nil Registry returns a nil Write,
// whose methods do nothing.
func (r *Registry[K]) BeginWrite(ref Ref, obj metav1.Object) *Write {
	if r == nil {
		return nil
	}
	k := keyOf(ref, obj.GetNamespace(), obj.GetName())
	return &Write{sink: r, ref: ref, key: k, id: r.exp.beginWrite(k, r.clock.Now().Add(r.writeHold))}
}

// Write is a write declared with BeginWrite. Its methods are safe for
// concurrent use; only the first Done or Abort counts.
type Write struct {
	sink  writeSink
	ref   Ref
	key   objectKey
	id    uint64
	ended atomic.Bool
}

// writeSink is the Registry, whatever its owner key type.
type writeSink interface {
	endWrite(w *Write, answer metav1.Object)
}

// Done ends the write with the object the API server answered (its
// namespace, name and resourceVersion are read; a PartialObjectMetadata
// will do): the event of that version is not delivered, whether it was held
// or is still to come, and the events held meanwhile are handled. Call it
// from the writer's goroutine: a held event another owner must see is
// delivered, through Map and Enqueue, before Done returns.
func (w *Write) Done(answer metav1.Object) {
	if w == nil || w.ended.Swap(true) {
		return
	}
	w.sink.endWrite(w, answer)
}

// Abort ends a write that failed, or whose answer is unknown: the events
// held meanwhile are delivered, as if it had not been declared.
func (w *Write) Abort() {
	if w == nil || w.ended.Swap(true) {
		return
	}
	w.sink.endWrite(w, nil)
}

// End ends the write with a request's answer and error: Done with the
// answer when err is nil, Abort otherwise.
func (w *Write) End(answer metav1.Object, err error) {
	if err != nil || answer == nil {
		w.Abort()
		return
	}
	w.Done(answer)
}

func (r *Registry[K]) endWrite(w *Write, answer metav1.Object) {
	// The expectation first: the held event of the write's version must
	// find it when it is handled again.
	if answer != nil {
		r.ExpectWrite(w.ref, answer)
	}
	r.resume(r.exp.endWrite(w.key, w.id))
}

// ExpectWrite announces the owner's own create, update or apply of obj, as
// the API server answered it (its namespace, name and resourceVersion are
// read): the add or update event of that version is not delivered (counted
// as own-write), by whichever informer of ref's cluster and resource
// delivers it. Call it right after the write returns; when the event may
// come first, as it often does, declare the write beforehand with
// BeginWrite instead, whose Done calls ExpectWrite. Unused expectations
// expire after Options.ExpectationTTL. Without the object at hand,
// &metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv} will do.
func (r *Registry[K]) ExpectWrite(ref Ref, obj metav1.Object) {
	rv := obj.GetResourceVersion()
	if rv == "" {
		return
	}
	ns, name := obj.GetNamespace(), obj.GetName()
	// When the cache already holds the version, its event has come first
	// and is handled or about to be (the cache is updated before handlers
	// run): the expectation is needed for moments at most, not for the TTL.
	ttl := r.expectationTTL
	if r.cached(ref, ns, name, rv) {
		ttl = min(ttl, lateExpectationTTL)
	}
	r.exp.expectWrite(keyOf(ref, ns, name), rv, r.clock.Now().Add(ttl))
}

// lateExpectationTTL bounds an expectation whose event reached the cache
// before ExpectWrite was called.
const lateExpectationTTL = 5 * time.Second

// cached reports whether the cache serving ref holds the object at
// resourceVersion.
func (r *Registry[K]) cached(ref Ref, namespace, name, resourceVersion string) bool {
	p, found, err := r.lookup(ref, namespace, name)
	return err == nil && found && p.ResourceVersion == resourceVersion
}

// ExpectDelete announces the owner's own delete of obj (its namespace, name
// and UID are read; call it before deleting): its delete event is not
// delivered (counted as own-write). With a UID, only that object's delete
// matches, from any informer; the delete of an object re-created under the
// same name since is delivered. Without one, the first delete of the name
// matches. Unused expectations expire after Options.ExpectationTTL.
func (r *Registry[K]) ExpectDelete(ref Ref, obj metav1.Object) {
	r.exp.expectDelete(keyOf(ref, obj.GetNamespace(), obj.GetName()), obj.GetUID(), r.clock.Now().Add(r.expectationTTL))
}

// UnexpectDelete withdraws ExpectDelete(ref, obj) when the delete failed
// (other than with NotFound): else, for Options.ExpectationTTL, someone
// else's delete of that object would be taken for the owner's own, and not
// delivered. An expectation some delete event has matched already, or one
// for another UID, is left as it is. When the failed delete did happen (a
// timeout after the API server acted), its event is delivered: a spare
// wake-up, where a kept expectation could hide a real one.
func (r *Registry[K]) UnexpectDelete(ref Ref, obj metav1.Object) {
	r.exp.unexpectDelete(keyOf(ref, obj.GetNamespace(), obj.GetName()), obj.GetUID())
}

// AwaitDelete is for an owner that deleted obj (ExpectDelete) and found it
// still there, held by a finalizer, and now waits for it to go: the
// expectation is withdrawn, so that the delete event, whenever the
// finalizer lets the object go, is delivered and wakes the owner rather
// than being taken for the owner's own write (the owner's next look would
// otherwise wait for a resync or a backoff). It reports whether that event
// has been seen already: then the object is gone, and there is nothing to
// wait for. For the delete's own UID only, as UnexpectDelete.
func (r *Registry[K]) AwaitDelete(ref Ref, obj metav1.Object) (gone bool) {
	return r.exp.unexpectDelete(keyOf(ref, obj.GetNamespace(), obj.GetName()), obj.GetUID())
}

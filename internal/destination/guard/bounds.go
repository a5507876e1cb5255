// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vidra-operator/vidra/internal/wording"
)

// answerBound is what one successful answer may hold: bytes of text and
// JSON values, and what the answer is, for its error.
type answerBound struct {
	what          string
	bytes, values int64
	// list says that the answer is a page of a list (see answerLimits.lists).
	list bool
	// about is the object the request concerns (see AnswersAbout).
	about *answersAbout
}

// The part of the bound of an answer about an object (see AnswersAbout)
// that does not grow with the object: room for what an API server adds to
// any object (defaults, managedFields, a status, what admission webhooks
// inject, fields others set that spec.ignore leaves them).
const (
	answerAboutBytes  = 1 << 20
	answerAboutValues = 20_000
)

// boundOf returns the bound of the answer to req. Discovery documents are
// the largest answers of a cluster with thousands of CRDs, about 30 values
// a resource: told by the client that asks, or the path asked for, never
// by the kind the server names. An answer about an object Vidra declares
// is bounded in proportion to it.
func (t *answerGuard) boundOf(req *http.Request) answerBound {
	b := answerBound{what: "an answer", bytes: t.limits.answer, values: t.limits.values}
	switch {
	case t.limits.lists && req.Method == http.MethodGet:
		b.what, b.list = "a list", true
	case t.limits.discovery || isDiscoveryPath(req):
		b.values = max(b.values, maxDiscoveryValues)
	default:
		about, _ := req.Context().Value(answersAboutKey{}).(*answersAbout)
		if about == nil || !t.limits.aboutObjects {
			break
		}
		// An API server's answer about an object holds the object, its
		// managedFields (about as many values again, in fewer bytes), its
		// defaults and its status: four times the object and the fixed
		// room above hold every answer of a real server measured.
		size := about.sizeOf()
		b.about = about
		b.bytes = min(b.bytes, (answerAboutBytes+4*size+1<<10-1)&^(1<<10-1))
		b.values = min(b.values, answerAboutValues+size)
	}
	return b
}

// poolFull is the error of a watch stream its namespace's pool has no room
// for.
func (t *answerGuard) poolFull() error {
	return &watchPoolError{server: t.server, namespace: t.pool.namespace, max: t.pool.max}
}

// tooLarge is the error of a watch event over limit bytes or values.
func (t *answerGuard) tooLarge(what string, limit, values int64) error {
	return answerBound{what: what}.tooLarge(t, limit, values)
}

// tooLarge is the error of an answer over limit bytes or values.
func (b answerBound) tooLarge(t *answerGuard, limit, values int64) error {
	e := &answerTooLargeError{server: t.server, what: b.what, limit: limit, values: values}
	switch {
	case b.list:
		e.hint = fmt.Sprintf("If it is, it holds more objects of one kind with Vidra's labels than Vidra caches from a remote cluster: %s or %d JSON values in one list, its pages together",
			wording.Bytes(t.limits.answer), t.limits.values)
	case b.about != nil:
		e.what, e.about = "an answer about "+b.about.what(), true
		e.hint = fmt.Sprintf("If it is, the object has grown far beyond its manifest (%d bytes as Vidra sends it): an answer about an object of a manifest may hold 1 MiB more than four times the object, and %d JSON values more than its bytes",
			b.about.sizeOf(), answerAboutValues)
	}
	return e
}

// answersAboutKey is the context key of AnswersAbout.
type answersAboutKey struct{}

// answersAbout is the object requests concern, and its size as Vidra
// sends it, measured when an answer first needs it: most reconciles send
// nothing.
type answersAbout struct {
	obj  *unstructured.Unstructured
	once sync.Once
	size int64
}

func (a *answersAbout) sizeOf() int64 {
	a.once.Do(func() {
		if a.size > 0 {
			return
		}
		if sent, err := a.obj.MarshalJSON(); err == nil {
			a.size = int64(len(sent))
		}
	})
	return a.size
}

// what names the object as messages do.
func (a *answersAbout) what() string {
	if ns := a.obj.GetNamespace(); ns != "" {
		return a.obj.GetKind() + " " + ns + "/" + a.obj.GetName()
	}
	return a.obj.GetKind() + " " + a.obj.GetName()
}

// AnswersAbout tells the clients of a remote cluster that the requests made
// with the returned context concern obj, as its manifest declares it, and
// that what Vidra sends of it is at most size bytes (0: obj's JSON). Their
// answers may hold at most 1 MiB more than four times that, and 20,000
// JSON values more than its bytes, rather than the 8 MiB and 100,000 values
// of any answer: a tenant's own server answers with as much as Vidra reads,
// and each worker may be holding an answer (at 8 MiB, four of them took
// the heap 95 to 131 MiB up). Clients of the local cluster ignore it.
func AnswersAbout(ctx context.Context, obj *unstructured.Unstructured, size int64) context.Context {
	return context.WithValue(ctx, answersAboutKey{}, &answersAbout{obj: obj, size: size})
}

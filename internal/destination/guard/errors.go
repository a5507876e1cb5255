// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"errors"
	"fmt"

	"github.com/vidra-operator/vidra/internal/wording"
)

// answerTooLargeError says that a server sent more than Vidra reads of one
// answer, list or watch event: limit bytes, or values JSON values.
type answerTooLargeError struct {
	server string
	what   string
	limit  int64
	values int64
	// hint says what else the answer may mean.
	hint string
	// about says that the limit was the bound of an answer about an object
	// (AnswersAbout): a refusal of the request (see RefusedAnswer).
	about bool
}

func (e *answerTooLargeError) Error() string {
	over := wording.Bytes(e.limit)
	if e.values > 0 {
		over = fmt.Sprintf("%d JSON values", e.values)
	}
	msg := fmt.Sprintf("the API server at %s sent %s over %s, more than Vidra reads from a remote cluster; is destination.server a Kubernetes API server?",
		e.server, e.what, over)
	if e.hint != "" {
		msg += " " + e.hint
	}
	return msg
}

// discoveryPoolError says that a namespace's remote clusters would hold
// more discovery than their pool.
type discoveryPoolError struct {
	server, namespace string
	values, max       int64
}

func (e *discoveryPoolError) Error() string {
	return fmt.Sprintf("the API server at %s sent discovery documents that would make the remote clusters of namespace %s hold more than %d JSON values of them (this one has %d), the most Vidra holds for one namespace; is destination.server a Kubernetes API server? "+
		"If it is, the namespace's resources name more clusters, or clusters with more resource types, than Vidra serves one namespace: a cluster with 2,500 CustomResourceDefinitions takes about half of it",
		e.server, e.namespace, e.max, e.values)
}

// watchPoolError says that a namespace's watch streams would hold more than
// their pool.
type watchPoolError struct {
	server, namespace string
	max               int64
}

func (e *watchPoolError) Error() string {
	return fmt.Sprintf("the watches of the remote clusters of namespace %s would hold more than %s of watch events at once, the most Vidra holds for one namespace; Vidra ended the watch of the API server at %s. "+
		"Is destination.server a Kubernetes API server? If it is, its objects with Vidra's labels change in large numbers, or are very large: keep fewer or smaller objects with Vidra's labels, or fewer kinds, on the namespace's remote clusters",
		e.namespace, wording.Bytes(e.max), e.server)
}

// RefusedAnswer returns the error in err's chain that refused one answer of
// a remote cluster for what it would make Vidra hold, not for what it says
// of its server, or nil: an answer about an object over the object's bound,
// or discovery over its namespace's pool. It fails the request, not the
// server: the server's breaker stays closed, and the other requests to it
// go on.
func RefusedAnswer(err error) error {
	var tooLarge *answerTooLargeError
	var pool *discoveryPoolError
	switch {
	case errors.As(err, &tooLarge) && tooLarge.about:
		return tooLarge
	case errors.As(err, &pool):
		return pool
	}
	return nil
}

// OverLimit returns the error in err's chain that says a server sent more
// than Vidra reads (an answer, a list or a watch event over its bound, or
// watches past their namespace's pool), or nil: the server answered, too
// much, and the error says so itself better than "unreachable" would.
func OverLimit(err error) error {
	var tooLarge *answerTooLargeError
	var pool *watchPoolError
	switch {
	case errors.As(err, &tooLarge):
		return tooLarge
	case errors.As(err, &pool):
		return pool
	}
	return nil
}

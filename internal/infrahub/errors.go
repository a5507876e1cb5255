// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub

import "time"

// Kind is what went wrong with a call to Infrahub, as a caller decides on
// it (retry, report, which field to check).
type Kind string

// The kinds of Error.
const (
	// KindUnauthorized: 401 after the one refresh or login allowed, or a
	// login refused (bad password, inactive or unknown user).
	KindUnauthorized Kind = "Unauthorized"
	// KindForbidden: 403, the account may not do this (an anonymous POST).
	KindForbidden Kind = "Forbidden"
	// KindNotFound: 404, an unknown artifact, branch (GraphQL) or path.
	KindNotFound Kind = "NotFound"
	// KindBadRequest: 400 or 422, an unknown branch or an "at" Infrahub
	// refused.
	KindBadRequest Kind = "BadRequest"
	// KindQueryError: the query failed in Infrahub's GraphQL (502 with
	// Infrahub's envelope from a stored query, or 200 with errors from
	// /graphql): the query or its variables need fixing.
	KindQueryError Kind = "QueryError"
	// KindUnavailable: 503 or 504, or a 502 that is not Infrahub's (a
	// gateway's); Infrahub or its database is down or overloaded.
	KindUnavailable Kind = "Unavailable"
	// KindServerError: another 5xx.
	KindServerError Kind = "ServerError"
	// KindTooManyRequests: 429; RetryAfter says how long to wait.
	KindTooManyRequests Kind = "TooManyRequests"
	// KindTimeout: no complete answer within the call's timeout.
	KindTimeout Kind = "Timeout"
	// KindTooLarge: the answer passed its bound.
	KindTooLarge Kind = "TooLarge"
	// KindBadAnswer: the answer is not what Infrahub answers (not JSON, not
	// the expected shape, a field over its bound, a redirect, another
	// status).
	KindBadAnswer Kind = "BadAnswer"
	// KindNetwork: no answer: the name did not resolve, the connection was
	// refused or denied (--destination-cidr-deny), TLS failed.
	KindNetwork Kind = "Network"
)

// Error is a failed call to Infrahub. Its Error() text is Vidra's own
// words (the operation, the server, the HTTP status, what to check) and
// never text the server sent.
type Error struct {
	// Op is the operation: "login", "refresh", "query", "graphql",
	// "download".
	Op string
	// Host is the server's host[:port].
	Host string
	// Kind says what went wrong.
	Kind Kind
	// Status is the HTTP status, 0 when there was no answer.
	Status int
	// RetryAfter is the answer's Retry-After (429, 503), 0 when absent.
	RetryAfter time.Duration
	// Limit is the bound a KindTooLarge answer passed, in bytes.
	Limit int64

	// bodyLen and excerpt describe the answer's body, for logs only.
	bodyLen int64
	excerpt string
	// detail is Vidra's own words on the cause, when the kind alone does
	// not say it (which field, which bound); never the server's text.
	detail string
	// err is the cause (a net, TLS or context error), for errors.Is/As;
	// its text is not part of Error().
	err error
}

// Error returns Vidra's words for the failure.
func (e *Error) Error() string { return "infrahub: " + string(e.Kind) }

// Unwrap returns the cause, if any.
func (e *Error) Unwrap() error { return e.err }

// Retryable reports whether trying again later, with backoff, may help:
// Infrahub or the network was unavailable, slow or overloaded. A refusal
// (401, 403, 404, 400, a query error, an answer over its bound or not
// Infrahub's) needs a change by a person first.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case KindUnavailable, KindServerError, KindTooManyRequests, KindTimeout, KindNetwork:
		return true
	}
	return false
}

// LogKeysAndValues returns structured-log pairs about the failure: the
// operation, host, status, kind and, of the answer's body, its length and
// a short escaped excerpt (at most MaxExcerpt bytes of the body). For logs
// only: never for a status or an Event.
func (e *Error) LogKeysAndValues() []any {
	return []any{"op", e.Op, "host", e.Host, "kind", string(e.Kind), "code", e.Status, "bodyBytes", e.bodyLen, "bodyExcerpt", e.excerpt}
}

// MaxExcerpt bounds the excerpt of a body LogKeysAndValues gives.
const MaxExcerpt = 128

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vidra-operator/vidra/internal/wording"
)

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
	// KindInvalid: the Source cannot be asked for (a branch, at or query
	// name Vidra refuses); nothing was sent.
	KindInvalid Kind = "Invalid"
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

// Error returns Vidra's words for the failure: who answered what to which
// operation, and what to check. Nothing of it comes from the server.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Kind == KindInvalid:
		fmt.Fprintf(&b, "Vidra did not send %s to Infrahub at %s", opText(e.Op), e.Host)
	case e.Status != 0:
		fmt.Fprintf(&b, "Infrahub at %s answered HTTP %d to %s", e.Host, e.Status, opText(e.Op))
	default:
		fmt.Fprintf(&b, "Infrahub at %s gave no answer to %s", e.Host, opText(e.Op))
	}
	b.WriteString(": ")
	b.WriteString(e.advice())
	return b.String()
}

// opText names an operation in a sentence.
func opText(op string) string {
	switch op {
	case OpLogin:
		return "the login"
	case OpRefresh:
		return "the refresh of the access token"
	case OpQuery:
		return "the stored query"
	case OpGraphQL:
		return "Vidra's artifact query"
	case OpDownload:
		return "the download of an artifact"
	}
	return "a request"
}

// The operations of Error.Op.
const (
	OpLogin    = "login"
	OpRefresh  = "refresh"
	OpQuery    = "query"
	OpGraphQL  = "graphql"
	OpDownload = "download"
)

// advice is what the Kind means and what to check, in Vidra's words.
func (e *Error) advice() string {
	with := func(s string) string {
		if e.detail == "" {
			return s
		}
		return e.detail + "; " + s
	}
	switch e.Kind {
	case KindUnauthorized:
		return with("check the credentials in spec.source.credentialsSecretRef")
	case KindForbidden:
		return with("check that the account of spec.source.credentialsSecretRef may read artifacts (Infrahub refuses queries without credentials)")
	case KindNotFound:
		if e.Op == OpDownload {
			return with("the artifact is not there (deleted since the query?); check spec.source.targetBranch")
		}
		return with("check spec.source.targetBranch (does the branch exist?) and spec.source.infrahubAPIURL")
	case KindBadRequest:
		return with("check spec.source.targetBranch (does the branch exist?) and spec.source.targetDate")
	case KindQueryError:
		if e.Op == OpQuery {
			return with("the stored query failed in Infrahub's GraphQL; check spec.queryName: the query must take $artifactname and select CoreArtifact")
		}
		return with("the query failed in Infrahub's GraphQL; check spec.source.artefactName (Vidra's query needs Infrahub 1.2 or later)")
	case KindUnavailable:
		return with("Infrahub or its database is unavailable or overloaded" + e.retryText())
	case KindServerError:
		return with("Infrahub failed on the request" + e.retryText())
	case KindTooManyRequests:
		return with("Infrahub is overloaded and asks clients to slow down" + e.retryText())
	case KindTimeout:
		return with("no complete answer in time; is Infrahub overloaded, or the network slow?")
	case KindTooLarge:
		if e.Op == OpDownload {
			return with(fmt.Sprintf("the artifact's content is over %s, more than a VidraResource's manifest holds; make the artifact smaller or split it", wording.Bytes(e.Limit)))
		}
		return with(fmt.Sprintf("the answer is over %s, more than Vidra reads of one answer; select fewer artifacts or fields", wording.Bytes(e.Limit)))
	case KindBadAnswer:
		return with("this is not an answer Infrahub gives; check that spec.source.infrahubAPIURL names Infrahub's address")
	case KindNetwork:
		return with("check spec.source.infrahubAPIURL and that Infrahub is reachable from the operator")
	case KindInvalid:
		return with("nothing was sent")
	}
	return with("an unexpected failure")
}

// retryText says when Vidra tries again.
func (e *Error) retryText() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("; Vidra tries again (Infrahub asked to wait %s)", e.RetryAfter)
	}
	return "; Vidra tries again"
}

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
	kv := []any{"op", e.Op, "host", e.Host, "kind", string(e.Kind), "code", e.Status, "bodyBytes", e.bodyLen, "bodyExcerpt", e.excerpt}
	if e.err != nil {
		// A network or TLS error may name what the server presented (its
		// certificate's names): escaped and cut, as a body's excerpt.
		kv = append(kv, "cause", escapedExcerpt([]byte(e.err.Error()), 2*MaxExcerpt))
	}
	return kv
}

// MaxExcerpt bounds the excerpt of a body LogKeysAndValues gives.
const MaxExcerpt = 128

// setBody records, for logs, the length of a body and its escaped start.
func (e *Error) setBody(body []byte) {
	e.bodyLen = int64(len(body))
	e.excerpt = escapedExcerpt(body, MaxExcerpt)
}

// escapedExcerpt is the start of b, at most n bytes of it, escaped as a Go
// string's ASCII quoting escapes it (no control character, no terminal
// escape reaches a log).
func escapedExcerpt(b []byte, n int) string {
	q := strconv.QuoteToASCII(string(b[:min(len(b), n)]))
	return q[1 : len(q)-1]
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/infrahub/standin"
)

// foreignText is what a hostile or chatty Infrahub says in its answers; it
// must never reach an Error's text (statuses and Events are read by
// tenants).
const foreignText = "FOREIGN<script>alert(1)</script>"

func TestInfrahubFailuresBecomeKindsInVidrasWords(t *testing.T) {
	for _, tt := range []struct {
		name       string
		fault      standin.Fault
		timeout    time.Duration
		kind       infrahub.Kind
		status     int
		retryable  bool
		retryAfter time.Duration
		says       string
	}{
		{name: "429 with Retry-After", fault: standin.Fault{Status: 429, RetryAfter: 7 * time.Second, Message: foreignText},
			kind: infrahub.KindTooManyRequests, status: 429, retryable: true, retryAfter: 7 * time.Second, says: "asked to wait 7s"},
		{name: "502 of a failed stored query", fault: standin.Fault{Status: 502, Message: "GraphQLQuery ArtifactIDs: " + foreignText},
			kind: infrahub.KindQueryError, status: 502, says: "spec.queryName"},
		{name: "502 of a gateway", fault: standin.Fault{Status: 502, Body: standin.BodyGateway},
			kind: infrahub.KindUnavailable, status: 502, retryable: true, says: "gateway"},
		{name: "503", fault: standin.Fault{Status: 503, Message: foreignText, RetryAfter: 2 * time.Second},
			kind: infrahub.KindUnavailable, status: 503, retryable: true, retryAfter: 2 * time.Second, says: "unavailable"},
		{name: "504", fault: standin.Fault{Status: 504, Message: foreignText},
			kind: infrahub.KindUnavailable, status: 504, retryable: true, says: "unavailable"},
		{name: "500", fault: standin.Fault{Status: 500, Message: foreignText},
			kind: infrahub.KindServerError, status: 500, retryable: true, says: "failed on the request"},
		{name: "400", fault: standin.Fault{Status: 400, Message: foreignText},
			kind: infrahub.KindBadRequest, status: 400, says: "spec.source.targetDate"},
		{name: "slow answer", fault: standin.Fault{Delay: time.Minute}, timeout: 200 * time.Millisecond,
			kind: infrahub.KindTimeout, retryable: true, says: "within 200ms"},
		{name: "endless answer within the timeout", fault: standin.Fault{Body: standin.BodyEndless},
			kind: infrahub.KindTooLarge, status: 200, says: "over 4 MiB"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startStandin(t, standin.Options{})
			tt.fault.Endpoint = standin.EndpointQuery
			s.Fault(tt.fault)
			c := newClient(t, s, infrahub.Credentials{Token: apiToken}, func(o *infrahub.Options) { o.Timeout = tt.timeout })
			_, err := c.Artifacts(ctx(t), byName)
			e := asError(t, err)
			if e.Kind != tt.kind || e.Status != tt.status || e.Retryable() != tt.retryable || e.RetryAfter != tt.retryAfter {
				t.Errorf("error %+v (retryable %v): want kind %s, status %d, retryable %v, Retry-After %s",
					e, e.Retryable(), tt.kind, tt.status, tt.retryable, tt.retryAfter)
			}
			msg := err.Error()
			if strings.Contains(msg, "FOREIGN") || strings.Contains(msg, "GraphQLQuery") || strings.Contains(msg, "<") {
				t.Errorf("Error() quotes the server: %q", msg)
			}
			if !strings.Contains(msg, tt.says) || !strings.Contains(msg, "Infrahub at 127.0.0.1:") {
				t.Errorf("Error() = %q, want it to name the server and say %q", msg, tt.says)
			}
			if tt.status != 0 && !strings.Contains(msg, "HTTP ") {
				t.Errorf("Error() = %q, want the HTTP status", msg)
			}
			// The body is for logs only, escaped and cut.
			kv := e.LogKeysAndValues()
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == "bodyExcerpt" && len(kv[i+1].(string)) > 4*infrahub.MaxExcerpt {
					t.Errorf("excerpt of %d bytes", len(kv[i+1].(string)))
				}
			}
			// The fault was one answer: the next call succeeds.
			if _, err := c.Artifacts(ctx(t), byName); err != nil {
				t.Errorf("after the fault: %v", err)
			}
		})
	}
}

func TestStoredQueryErrorIsAQueryErrorWithoutInfrahubsText(t *testing.T) {
	s := startStandin(t, standin.Options{})
	s.AddStoredQuery("Broken", `query { CoreArtifact { edges { node { nope } } } }`)
	c := newClient(t, s, login)
	_, err := c.Artifacts(ctx(t), infrahub.Source{QueryName: "Broken", ArtifactName: "app"})
	e := asError(t, err)
	if e.Kind != infrahub.KindQueryError || e.Status != 502 || e.Retryable() {
		t.Errorf("error %+v: want a QueryError 502, not retryable", e)
	}
	if msg := err.Error(); strings.Contains(msg, "nope") || strings.Contains(msg, "Cannot query") {
		t.Errorf("Error() quotes Infrahub: %q", msg)
	}
}

func TestUnknownBranchIsNamedInVidrasWords(t *testing.T) {
	s := startStandin(t, standin.Options{})
	c := newClient(t, s, login)
	_, err := c.Artifacts(ctx(t), infrahub.Source{Branch: "feature/nope", ArtifactName: "app"})
	if e := asError(t, err); e.Kind != infrahub.KindNotFound || e.Status != 404 || !strings.Contains(err.Error(), "spec.source.targetBranch") || strings.Contains(err.Error(), "not found.") {
		t.Errorf("GraphQL on an unknown branch: %v (%+v), want NotFound naming targetBranch in Vidra's words", err, e)
	}
	_, err = c.Artifacts(ctx(t), infrahub.Source{Branch: "feature/nope", QueryName: "ArtifactIDs", ArtifactName: "app"})
	if e := asError(t, err); e.Kind != infrahub.KindBadRequest || e.Status != 400 {
		t.Errorf("stored query on an unknown branch: %+v, want BadRequest 400", e)
	}
}

func TestInvalidSourceSendsNothing(t *testing.T) {
	s := startStandin(t, standin.Options{})
	c := newClient(t, s, login)
	for _, src := range []infrahub.Source{
		{ArtifactName: "app", At: "now+2h"},
		{ArtifactName: "app", Branch: "../admin"},
		{ArtifactName: "app", QueryName: ".."},
		{},
	} {
		_, err := c.Artifacts(ctx(t), src)
		if e := asError(t, err); e.Kind != infrahub.KindInvalid {
			t.Errorf("Artifacts(%+v): %+v, want Invalid", src, e)
		}
	}
	_, err := c.Download(ctx(t), infrahub.Source{}, "../../api/auth/logout")
	if e := asError(t, err); e.Kind != infrahub.KindInvalid {
		t.Errorf("Download of a path: %+v, want Invalid", e)
	}
	if got := s.Counts(); got.Total() != 0 {
		t.Errorf("counts %+v: an invalid source sends nothing", got)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

import (
	"net/http"
	"strconv"
	"time"
)

// Endpoint names a group of Infrahub's paths, for faults and counts.
type Endpoint string

// The endpoints.
const (
	EndpointLogin    Endpoint = "login"    // POST /api/auth/login
	EndpointRefresh  Endpoint = "refresh"  // POST /api/auth/refresh
	EndpointLogout   Endpoint = "logout"   // POST /api/auth/logout
	EndpointQuery    Endpoint = "query"    // /api/query/{name}
	EndpointGraphQL  Endpoint = "graphql"  // /graphql[/{branch}]
	EndpointDownload Endpoint = "download" // GET /api/artifact/{id}, /api/storage/object/{id}
)

// Body is an injected body of a fault.
type Body int

// The bodies of a fault.
const (
	// BodyEnvelope is Infrahub's error envelope for the status.
	BodyEnvelope Body = iota
	// BodyHuge is a 200 answer of HugeBodyBytes, sent without a length
	// (chunked): the client finds out as it reads.
	BodyHuge
	// BodyHugeDeclared is a 200 answer of HugeBodyBytes whose
	// Content-Length says so.
	BodyHugeDeclared
	// BodyEndless is a 200 answer that never ends (until the client goes
	// or the server closes).
	BodyEndless
	// BodyGateway is a reverse proxy's HTML page with the status (502 by
	// default), not Infrahub's envelope.
	BodyGateway
)

// HugeBodyBytes is the size of a BodyHuge answer.
const HugeBodyBytes = 50 << 20

// Fault is a failure injected into the next answers of an endpoint.
type Fault struct {
	// Endpoint is where the fault applies.
	Endpoint Endpoint
	// Times is how many answers it applies to (0 means 1).
	Times int
	// Status is the status to answer with instead (429, 502, 503, ...);
	// 0 answers as usual (after Delay) or with Body.
	Status int
	// Message is the text of the envelope's message ("" means Infrahub's
	// usual text for the status).
	Message string
	// RetryAfter, with 429 or 503, is sent as Retry-After in seconds.
	RetryAfter time.Duration
	// Delay is waited before answering (ended by the client going away or
	// Close).
	Delay time.Duration
	// Body is the kind of body.
	Body Body
}

// Fault queues f: the next f.Times answers of f.Endpoint follow it, after
// the faults queued before.
func (s *Server) Fault(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[f.Endpoint] = append(s.faults[f.Endpoint], f)
}

// nextFault takes one answer's worth of the endpoint's first fault. s.mu is
// held.
func (s *Server) nextFault(e Endpoint) (Fault, bool) {
	q := s.faults[e]
	if len(q) == 0 {
		return Fault{}, false
	}
	f := q[0]
	if q[0].Times--; q[0].Times == 0 {
		s.faults[e] = q[1:]
	}
	return f, true
}

// apply answers r as f says, and reports whether it did (false: f was a
// delay only, and the usual answer follows).
func (s *Server) apply(w http.ResponseWriter, r *http.Request, f Fault) bool {
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return true
		case <-s.done:
			return true
		}
	}
	switch f.Body {
	case BodyHuge, BodyHugeDeclared, BodyEndless:
		s.stream(w, r, f.Body)
		return true
	case BodyGateway:
		status := f.Status
		if status == 0 {
			status = http.StatusBadGateway
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		_, _ = w.Write([]byte("<html><body><h1>" + strconv.Itoa(status) + " " + http.StatusText(status) + "</h1></body></html>\n"))
		return true
	}
	if f.Status == 0 {
		return false
	}
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter/time.Second)))
	}
	msg := f.Message
	if msg == "" {
		msg = defaultMessage(f.Status)
	}
	writeError(w, f.Status, msg)
	return true
}

// defaultMessage is Infrahub's usual text for a status.
func defaultMessage(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "Too many requests, the server is overloaded. Please retry later."
	case http.StatusBadGateway:
		return "GraphQLQuery ArtifactIDs: Cannot query field 'x' on type 'Query'."
	case http.StatusServiceUnavailable:
		return "The database is unavailable."
	case http.StatusGatewayTimeout:
		return "The request timed out."
	}
	return http.StatusText(status)
}

// stream writes a 200 answer of HugeBodyBytes, or one that never ends, in
// chunks, until the client goes away or the server closes.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, body Body) {
	w.Header().Set("Content-Type", "application/yaml")
	if body == BodyHugeDeclared {
		w.Header().Set("Content-Length", strconv.Itoa(HugeBodyBytes))
	}
	w.WriteHeader(http.StatusOK)
	chunk := make([]byte, 32<<10)
	for i := range chunk {
		chunk[i] = 'a' + byte(i%26)
	}
	for sent := 0; body == BodyEndless || sent < HugeBodyBytes; sent += len(chunk) {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		default:
		}
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

import "time"

// Endpoint names a group of Infrahub's paths, for faults and counts.
type Endpoint string

// The endpoints.
const (
	EndpointLogin    Endpoint = "login"    // POST /api/auth/login
	EndpointRefresh  Endpoint = "refresh"  // POST /api/auth/refresh
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
	// BodyHuge is a 200 answer of 50 MiB.
	BodyHuge
	// BodyEndless is a 200 answer that never ends (until the client goes).
	BodyEndless
)

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
func (s *Server) Fault(f Fault) {}

// HugeBodyBytes is the size of a BodyHuge answer.
const HugeBodyBytes = 50 << 20

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

import (
	"net/http/httptest"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// The defaults of Options, Infrahub's own.
const (
	DefaultAccessLifetime  = time.Hour
	DefaultRefreshLifetime = 30 * 24 * time.Hour
	DefaultBranch          = "main"
	// ArtifactIDsQuery is the earlier operator's stored query, which the
	// stand-in holds by default under the name ArtifactIDs.
	ArtifactIDsQuery = `query ArtifactIDs($artifactname: [String]) {
  CoreArtifact(name__values: $artifactname) {
    edges { node { id storage_id { id } checksum { value } name { value } } }
  }
}`
)

// Options configure a Server. The zero value of each field is its default.
type Options struct {
	// TLS serves https with a self-signed certificate (CertPEM).
	TLS bool
	// Addr is the address to listen on ("" means 127.0.0.1:0).
	Addr string
	// AccessLifetime is the life of an access token (DefaultAccessLifetime),
	// RefreshLifetime of a refresh token (DefaultRefreshLifetime).
	AccessLifetime, RefreshLifetime time.Duration
	// DenyAnonymous refuses anonymous GETs too (Infrahub's
	// allow_anonymous_access off).
	DenyAnonymous bool
	// DefaultBranch is the branch of /graphql and of requests without
	// branch= ("" means DefaultBranch); it always exists.
	DefaultBranch string
	// Clock tells the time tokens are issued and checked at; nil means the
	// real clock. A fake clock expires tokens without waiting.
	Clock clock.PassiveClock
	// OnArtifactChange, if not nil, is told of every artifact SetArtifact
	// creates or changes (not of an unchanged one), after the change, from
	// SetArtifact's goroutine: the seam for Infrahub's artifact webhooks.
	OnArtifactChange func(Change)
}

// Change is a created or changed artifact, what Infrahub's
// infrahub.artifact.created and infrahub.artifact.updated events carry.
type Change struct {
	// Event is "infrahub.artifact.created" or "infrahub.artifact.updated".
	Event  string
	Branch string
	// ID is the artifact's id (the event's node_id), Target its target's.
	ID, Target        string
	DefinitionID      string
	Checksum          string
	ChecksumPrevious  string
	StorageID         string
	StorageIDPrevious string
	OccurredAt        time.Time
}

// Server is a stand-in Infrahub. Its methods are safe for concurrent use,
// also while it serves.
type Server struct {
	opts  Options
	clock clock.PassiveClock
	srv   *httptest.Server

	mu sync.Mutex
}

// New returns a Server, not yet serving: add users, tokens and artifacts,
// then Start it.
func New(opts Options) *Server {
	return &Server{opts: opts}
}

// Start starts serving; URL tells where.
func (s *Server) Start() {}

// URL is the server's base URL (https://127.0.0.1:port with Options.TLS).
func (s *Server) URL() string { return "" }

// CertPEM is the PEM of the certificate the server serves with Options.TLS
// (self-signed, for 127.0.0.1 and localhost), nil without.
func (s *Server) CertPEM() []byte { return nil }

// Close stops serving and waits for the requests in flight; a slow or
// endless answer in flight ends.
func (s *Server) Close() {}

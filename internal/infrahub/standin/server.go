// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

import (
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
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
	// Addr is the address to listen on ("" means 127.0.0.1 and a free
	// port). Start panics if it cannot listen there, as httptest does;
	// Listener lets a caller handle that error itself.
	Addr string
	// Listener, if not nil, is where the server serves (Addr unused).
	Listener net.Listener
	// AccessLifetime is the life of an access token (DefaultAccessLifetime),
	// RefreshLifetime of a refresh token (DefaultRefreshLifetime).
	AccessLifetime, RefreshLifetime time.Duration
	// DenyAnonymous refuses anonymous GETs too (Infrahub's
	// allow_anonymous_access off).
	DenyAnonymous bool
	// DefaultBranch is the branch of /graphql and of requests without
	// branch= ("" means DefaultBranch); it always exists.
	DefaultBranch string
	// MaxPageSize, if positive, caps the edges of one answer (as a limit
	// argument would), so that clients must page by offset.
	MaxPageSize int
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
	// done is closed by Close: slow and endless answers end.
	done      chan struct{}
	closeOnce sync.Once

	mu             sync.Mutex
	secret         []byte
	accessLifetime time.Duration
	users          map[string]string
	tokens         map[string]bool
	// sessions are the live logins (Infrahub's refresh-token nodes), by id.
	sessions map[string]string
	branches map[string]map[string]*Stored
	// objects is the object store: content by storage id.
	objects     map[string][]byte
	definitions map[string]string
	queries     map[string]string
	faults      map[Endpoint][]Fault
	counts      Counts

	// webhooks and their faults and counts (webhooks.go); wg tracks the
	// deliveries in flight, which Close waits for.
	webhooks                        []Webhook
	webhookDrops, webhookDuplicates int
	webhookDelays                   int
	webhookDelay                    time.Duration
	deliveries                      Deliveries
	wg                              sync.WaitGroup
}

// New returns a Server, not yet serving: add users, tokens and artifacts,
// then Start it.
func New(opts Options) *Server {
	if opts.AccessLifetime <= 0 {
		opts.AccessLifetime = DefaultAccessLifetime
	}
	if opts.RefreshLifetime <= 0 {
		opts.RefreshLifetime = DefaultRefreshLifetime
	}
	if opts.DefaultBranch == "" {
		opts.DefaultBranch = DefaultBranch
	}
	s := &Server{
		opts:           opts,
		clock:          opts.Clock,
		done:           make(chan struct{}),
		secret:         randomBytes(32),
		accessLifetime: opts.AccessLifetime,
		users:          map[string]string{},
		tokens:         map[string]bool{},
		sessions:       map[string]string{},
		branches:       map[string]map[string]*Stored{opts.DefaultBranch: {}},
		objects:        map[string][]byte{},
		definitions:    map[string]string{},
		queries:        map[string]string{"ArtifactIDs": ArtifactIDsQuery},
		faults:         map[Endpoint][]Fault{},
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	return s
}

// Start starts serving; URL tells where.
func (s *Server) Start() {
	s.srv = httptest.NewUnstartedServer(s.handler())
	switch {
	case s.opts.Listener != nil:
		s.srv.Listener.Close()
		s.srv.Listener = s.opts.Listener
	case s.opts.Addr != "":
		l, err := net.Listen("tcp", s.opts.Addr)
		if err != nil {
			panic(fmt.Sprintf("standin: listen on %s: %v", s.opts.Addr, err))
		}
		s.srv.Listener.Close()
		s.srv.Listener = l
	}
	if s.opts.TLS {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
}

// URL is the server's base URL (https://127.0.0.1:port with Options.TLS).
func (s *Server) URL() string { return s.srv.URL }

// CertPEM is the PEM of the certificate the server serves with Options.TLS
// (self-signed, for 127.0.0.1, ::1 and example.com), nil without.
func (s *Server) CertPEM() []byte {
	if s.srv == nil || s.srv.TLS == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// Close stops serving and waits for the requests in flight; a slow or
// endless answer in flight ends.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		if s.srv != nil {
			s.srv.Close()
		}
		s.wg.Wait()
	})
}

// handler routes Infrahub's paths.
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/auth/login", s.counted(EndpointLogin, s.login))
	mux.HandleFunc("POST /api/auth/refresh", s.counted(EndpointRefresh, s.refresh))
	mux.HandleFunc("POST /api/auth/logout", s.counted(EndpointLogout, s.logout))
	mux.HandleFunc("POST /api/query/{name}", s.counted(EndpointQuery, s.storedQuery))
	mux.HandleFunc("GET /api/query/{name}", s.counted(EndpointQuery, s.storedQuery))
	mux.HandleFunc("POST /graphql", s.counted(EndpointGraphQL, s.graphQL))
	mux.HandleFunc("POST /graphql/{branch...}", s.counted(EndpointGraphQL, s.graphQL))
	mux.HandleFunc("GET /api/artifact/{id}", s.counted(EndpointDownload, s.artifact))
	mux.HandleFunc("GET /api/storage/object/{id}", s.counted(EndpointDownload, s.object))
	mux.HandleFunc("/", s.counted(endpointOther, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Not Found")
	}))
	return mux
}

// counted counts a request of endpoint, then applies its next fault, if
// any, before h.
func (s *Server) counted(endpoint Endpoint, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.counts.add(endpoint)
		if endpoint == EndpointQuery && r.URL.Query().Get("update_group") == "true" {
			s.counts.GroupUpdates++
		}
		f, ok := s.nextFault(endpoint)
		s.mu.Unlock()
		if ok && s.apply(w, r, f) {
			return
		}
		h(w, r)
	}
}

// now is the server's time.
func (s *Server) now() time.Time { return s.clock.Now() }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return b
}

// newID returns a new random id, in Infrahub's UUID form.
func newID() string { return formatUUID(randomBytes(16)) }

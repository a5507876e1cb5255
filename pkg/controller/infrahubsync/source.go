// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahubsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/vidra-operator/vidra/internal/infrahub"
)

// ArtifactSource is what a pass asks of Infrahub: the list of artifacts,
// and the content of one. *infrahub.Client is one; tests pass fakes.
type ArtifactSource interface {
	Artifacts(ctx context.Context, src infrahub.Source) ([]infrahub.Artifact, error)
	Download(ctx context.Context, src infrahub.Source, id string) (infrahub.Content, error)
}

// SourceRequest is what a SourceFactory builds an ArtifactSource from: the
// sync's Infrahub, and what was read from its Secrets.
type SourceRequest struct {
	// URL is spec.source.infrahubAPIURL.
	URL string
	// Credentials come from the credentials Secret.
	Credentials infrahub.Credentials
	// CAPEM comes from the CA Secret; nil means the system's roots.
	CAPEM []byte
}

// SourceFactory builds the ArtifactSource of a sync. internal/operator
// builds it over infrahub.New and infrahub.NewHTTPClient, with the
// operator's outbound guards; an error is a source Vidra refuses to use (a
// plain http:// URL without --allow-http-destinations, a bad CA).
type SourceFactory func(req SourceRequest) (ArtifactSource, error)

// sources keeps the ArtifactSource of each sync across passes, so that it
// logs in once and reuses its tokens. An entry is replaced when what it was
// built from changes, and dropped when the sync goes.
type sources struct {
	mu      sync.Mutex
	entries map[types.UID]sourceEntry
}

type sourceEntry struct {
	// spec fingerprints what the Secrets were read for (the source's
	// fields and the acting ServiceAccount); built fingerprints what the
	// source was built from (the Secrets' content too).
	spec, built string
	src         ArtifactSource
}

func newSources() *sources { return &sources{entries: map[types.UID]sourceEntry{}} }

// get returns the source kept for uid if it was built for spec.
func (s *sources) get(uid types.UID, spec string) (ArtifactSource, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[uid]
	if !ok || e.spec != spec {
		return nil, false
	}
	return e.src, true
}

// put keeps src for uid; it replaces the entry's source only when what it
// was built from changed, so that a re-read of unchanged Secrets keeps the
// tokens. It returns the source to use.
func (s *sources) put(uid types.UID, spec, built string, mk func() (ArtifactSource, error)) (ArtifactSource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[uid]; ok && e.built == built {
		e.spec = spec
		s.entries[uid] = e
		return e.src, nil
	}
	src, err := mk()
	if err != nil {
		delete(s.entries, uid)
		return nil, err
	}
	s.entries[uid] = sourceEntry{spec: spec, built: built, src: src}
	return src, nil
}

// forgetSpec makes the next pass read the Secrets again (Infrahub refused
// the credentials: they may have been rotated), keeping the source for
// when they turn out unchanged.
func (s *sources) forgetSpec(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[uid]; ok {
		e.spec = ""
		s.entries[uid] = e
	}
}

func (s *sources) drop(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.entries, uid)
}

// fingerprint hashes parts, each length-prefixed so that no two lists of
// parts hash alike; credentials never stay in memory as a key.
func fingerprint(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		for i, l := 0, len(p); i < 8; i, l = i+1, l>>8 {
			n[i] = byte(l)
		}
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

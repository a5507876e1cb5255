// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub_test

import (
	"crypto/md5"
	"encoding/hex"
	"runtime"
	"testing"

	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/infrahub/standin"
)

func TestDownloadGivesContentTypeAndChecksum(t *testing.T) {
	s := startStandin(t, standin.Options{})
	got, err := newClient(t, s, login).Download(ctx(t), infrahub.Source{Branch: "main", At: "2h"}, "a0000000-0000-0000-0000-000000000002")
	if err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum([]byte(`{"kind":"Secret"}`))
	stored, _ := s.GetArtifact("", "a0000000-0000-0000-0000-000000000002")
	if string(got.Data) != `{"kind":"Secret"}` || got.ContentType != "application/json" || got.Checksum != hex.EncodeToString(sum[:]) || got.Checksum != stored.Checksum {
		t.Errorf("Download = %+v, want the JSON content and Infrahub's checksum %s", got, stored.Checksum)
	}
}

func TestDownloadOfMissingArtifactIsNotFound(t *testing.T) {
	s := startStandin(t, standin.Options{})
	_, err := newClient(t, s, login).Download(ctx(t), infrahub.Source{}, "a0000000-0000-0000-0000-000000000009")
	if e := asError(t, err); e.Kind != infrahub.KindNotFound || e.Status != 404 || e.Retryable() {
		t.Errorf("error %+v: want NotFound 404", e)
	}
}

// TestOversizedArtifactBodiesAreRefusedAtTheBound serves 50 MiB and endless
// artifact bodies: each is refused once the bound is passed, and what the
// client allocates stays a few times the bound, not the body.
func TestOversizedArtifactBodiesAreRefusedAtTheBound(t *testing.T) {
	for _, tt := range []struct {
		name string
		body standin.Body
		// maxAlloc bounds what the process allocates meanwhile: an answer
		// that declares its length is refused before any of it is read.
		maxAlloc uint64
	}{
		{"50 MiB declared", standin.BodyHugeDeclared, 512 << 10},
		{"50 MiB chunked", standin.BodyHuge, 6 << 20},
		{"endless", standin.BodyEndless, 6 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startStandin(t, standin.Options{})
			c := newClient(t, s, login)
			// Log in first, so that only the download is measured.
			if _, err := c.Artifacts(ctx(t), byName); err != nil {
				t.Fatal(err)
			}
			s.Fault(standin.Fault{Endpoint: standin.EndpointDownload, Body: tt.body})
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := c.Download(ctx(t), infrahub.Source{}, "a0000000-0000-0000-0000-000000000001")
			runtime.ReadMemStats(&after)
			e := asError(t, err)
			if e.Kind != infrahub.KindTooLarge || e.Limit != infrahub.DefaultMaxArtifactBytes || e.Retryable() {
				t.Errorf("error %+v: want TooLarge at %d bytes, not retryable", e, infrahub.DefaultMaxArtifactBytes)
			}
			// The whole process is measured, the stand-in's writes
			// included: 6 MiB at most against a 50 MiB (or endless) body.
			t.Logf("allocated %.1f MiB", float64(after.TotalAlloc-before.TotalAlloc)/(1<<20))
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > tt.maxAlloc {
				t.Errorf("allocated %d KiB for one refused download, want at most %d KiB", alloc>>10, tt.maxAlloc>>10)
			}
			// The client is unharmed.
			if _, err := c.Download(ctx(t), infrahub.Source{}, "a0000000-0000-0000-0000-000000000001"); err != nil {
				t.Errorf("next download: %v", err)
			}
		})
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/infrahub/standin"
)

// The account and token of the stand-ins of these tests.
const (
	user     = "vidra"
	password = "s3cret"
	apiToken = "0f1e2d3c-api-token"
)

var login = infrahub.Credentials{Username: user, Password: password}

// startStandin starts a stand-in with the tests' account and token and two
// artifacts named "app" on the default branch.
func startStandin(t *testing.T, opts standin.Options) *standin.Server {
	t.Helper()
	s := standin.New(opts)
	s.AddUser(user, password)
	s.AddToken(apiToken)
	s.SetArtifact("", standin.Artifact{ID: "a0000000-0000-0000-0000-000000000001", Name: "app", Content: []byte("kind: ConfigMap\n")})
	s.SetArtifact("", standin.Artifact{ID: "a0000000-0000-0000-0000-000000000002", Name: "app", ContentType: "application/json", Content: []byte(`{"kind":"Secret"}`)})
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// httpClient is the outbound client of the tests: plain http to loopback
// allowed, the default deny list otherwise.
func httpClient(t *testing.T) *http.Client {
	t.Helper()
	hc, err := infrahub.NewHTTPClient(infrahub.HTTPOptions{Guard: allowHTTP})
	if err != nil {
		t.Fatal(err)
	}
	return hc
}

// newClient returns a client of s with creds; mod changes its options.
func newClient(t *testing.T, s *standin.Server, creds infrahub.Credentials, mod ...func(*infrahub.Options)) *infrahub.Client {
	t.Helper()
	opts := infrahub.Options{HTTPClient: httpClient(t), AllowHTTP: true, Credentials: creds}
	for _, m := range mod {
		m(&opts)
	}
	c, err := infrahub.New(s.URL(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ctx is a test's context, bounded so that a hang fails rather than stalls.
func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// asError returns err as an *infrahub.Error, failing the test otherwise.
func asError(t *testing.T, err error) *infrahub.Error {
	t.Helper()
	var e *infrahub.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *infrahub.Error", err, err)
	}
	return e
}

// byName is the Source of the stand-ins' artifacts through the default
// stored query.
var byName = infrahub.Source{QueryName: "ArtifactIDs", ArtifactName: "app"}

// allowHTTP lets the tests speak plain http to loopback.
var allowHTTP = destination.Guard{AllowHTTP: true}

// certPEM is the PEM of a TLS test server's certificate.
func certPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

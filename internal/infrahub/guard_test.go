// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/infrahub/standin"
)

func TestNewRefusesURLsThatLeakOrMislead(t *testing.T) {
	for _, tt := range []struct {
		url       string
		allowHTTP bool
		ok        bool
	}{
		{"https://infrahub.example.com", false, true},
		{"https://infrahub.example.com/prefix/", false, true},
		{"http://infrahub.example.com", true, true},
		{"http://infrahub.example.com", false, false},
		{"ftp://infrahub.example.com", true, false},
		{"https://user:pass@infrahub.example.com", false, false},
		{"https://infrahub.example.com/?x=1", false, false},
		{"https://infrahub.example.com/?", false, false},
		{"https://infrahub.example.com/#frag", false, false},
		{"https:///path", false, false},
		{"infrahub.example.com", false, false},
	} {
		_, err := infrahub.New(tt.url, infrahub.Options{AllowHTTP: tt.allowHTTP})
		if (err == nil) != tt.ok {
			t.Errorf("New(%q, allowHTTP %v) = %v, want ok %v", tt.url, tt.allowHTTP, err, tt.ok)
		}
		if err != nil && strings.Contains(err.Error(), "pass") {
			t.Errorf("New(%q): the error shows the password: %v", tt.url, err)
		}
	}
}

func TestRedirectIsNotFollowed(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	defer target.Close()
	redirector := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	caPEM := certPEM(redirector)
	for _, allowHTTP := range []bool{false, true} {
		hc, err := infrahub.NewHTTPClient(infrahub.HTTPOptions{Guard: destination.Guard{AllowHTTP: allowHTTP}, CAPEM: caPEM})
		if err != nil {
			t.Fatal(err)
		}
		c, err := infrahub.New(redirector.URL, infrahub.Options{HTTPClient: hc, AllowHTTP: allowHTTP, Credentials: infrahub.Credentials{Token: apiToken}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Artifacts(ctx(t), infrahub.Source{ArtifactName: "app"})
		if e := asError(t, err); e.Kind != infrahub.KindBadAnswer || e.Status != http.StatusTemporaryRedirect {
			t.Errorf("allowHTTP %v: %+v, want BadAnswer 307", allowHTTP, e)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests (and the API token): want none", n)
	}
}

func TestPlainHTTPIsRefusedUnlessAllowed(t *testing.T) {
	s := startStandin(t, standin.Options{})
	// The Client is told http is fine, its HTTP client is not.
	hc, err := infrahub.NewHTTPClient(infrahub.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := infrahub.New(s.URL(), infrahub.Options{HTTPClient: hc, AllowHTTP: true, Credentials: login})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Artifacts(ctx(t), byName)
	if e := asError(t, err); e.Kind != infrahub.KindNetwork || !strings.Contains(err.Error(), "--allow-http-destinations") {
		t.Errorf("error %v: want a Network refusal naming --allow-http-destinations", err)
	}
	if got := s.Counts(); got.Total() != 0 {
		t.Errorf("counts %+v: nothing may reach the server (the password would be in clear)", got)
	}
}

func TestDeniedAddressIsRefusedAtDial(t *testing.T) {
	s := startStandin(t, standin.Options{})
	hc, err := infrahub.NewHTTPClient(infrahub.HTTPOptions{Guard: destination.Guard{AllowHTTP: true, DenyCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := infrahub.New(s.URL(), infrahub.Options{HTTPClient: hc, AllowHTTP: true, Credentials: login})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Artifacts(ctx(t), byName)
	if e := asError(t, err); e.Kind != infrahub.KindNetwork || !strings.Contains(err.Error(), "--destination-cidr-deny") {
		t.Errorf("error %v: want a Network refusal naming --destination-cidr-deny", err)
	}
	if got := s.Counts(); got.Total() != 0 {
		t.Errorf("counts %+v: nothing may reach a denied address", got)
	}
}

func TestPrivateCAReplacesSystemRoots(t *testing.T) {
	s := startStandin(t, standin.Options{TLS: true})
	hc, err := infrahub.NewHTTPClient(infrahub.HTTPOptions{CAPEM: s.CertPEM()})
	if err != nil {
		t.Fatal(err)
	}
	c, err := infrahub.New(s.URL(), infrahub.Options{HTTPClient: hc, Credentials: login})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Artifacts(ctx(t), byName); err != nil {
		t.Fatalf("with the private CA: %v", err)
	}

	untrusting := newClientTLS(t, s, infrahub.HTTPOptions{})
	_, err = untrusting.Artifacts(ctx(t), byName)
	if e := asError(t, err); e.Kind != infrahub.KindNetwork || !strings.Contains(err.Error(), "caSecretRef") {
		t.Errorf("without the CA: %v, want a Network error pointing at caSecretRef", err)
	}

	for _, bad := range [][]byte{[]byte("not PEM"), bytes.Repeat([]byte("x"), infrahub.MaxCABytes+1)} {
		if _, err := infrahub.NewHTTPClient(infrahub.HTTPOptions{CAPEM: bad}); err == nil {
			t.Errorf("CA of %d bytes accepted", len(bad))
		}
	}
}

func newClientTLS(t *testing.T, s *standin.Server, opts infrahub.HTTPOptions) *infrahub.Client {
	t.Helper()
	hc, err := infrahub.NewHTTPClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := infrahub.New(s.URL(), infrahub.Options{HTTPClient: hc, Credentials: login})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

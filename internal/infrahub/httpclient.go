// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/wording"
)

// MaxCABytes bounds the PEM bundle of a private CA (HTTPOptions.CAPEM): a
// few dozen certificates. It comes from a tenant's Secret.
const MaxCABytes = 128 << 10

// maxHeaderBytes bounds the headers of an answer: Infrahub's are a few
// hundred bytes; Go's default would read 10 MiB of them.
const maxHeaderBytes = 64 << 10

// HTTPOptions configure the outbound HTTP client of Infrahub clients.
type HTTPOptions struct {
	// Guard holds --allow-http-destinations (AllowHTTP) and
	// --destination-cidr-deny (DenyCIDRs; nil means the default list),
	// the same guards as remote destinations. Its other fields are unused.
	Guard destination.Guard
	// CAPEM, when not empty, is a private CA bundle (a sync's caSecretRef):
	// the certificates Infrahub's must chain to, instead of the system
	// roots. At most MaxCABytes, with at least one certificate.
	CAPEM []byte
}

// NewHTTPClient returns the HTTP client Infrahub clients use: it dials only
// addresses outside the CIDR deny list (checked on the resolved address at
// dial time), uses no proxy, follows no redirect (a redirect answer is
// refused as KindBadAnswer: it would carry X-INFRAHUB-KEY to wherever it
// leads), sends nothing over plain http unless Guard.AllowHTTP, and trusts
// CAPEM instead of the system roots when given. It sets no Timeout: each
// call of a Client has its own.
//
// The private CA replaces the system roots rather than joining them: a sync
// that names its CA says who signs its Infrahub, and nobody else should
// pass for it. Build one HTTP client per distinct CA; the rest can share
// one (its connections are pooled per host).
func NewHTTPClient(opts HTTPOptions) (*http.Client, error) {
	dial, err := opts.Guard.DialContext()
	if err != nil {
		return nil, err
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(opts.CAPEM) > 0 {
		if len(opts.CAPEM) > MaxCABytes {
			return nil, fmt.Errorf("the CA bundle has %d bytes, over the %s Vidra reads", len(opts.CAPEM), wording.Bytes(MaxCABytes))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(opts.CAPEM) {
			return nil, errors.New("the CA bundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	transport := &http.Transport{
		// No proxy: behind one, the address checked would be the proxy's,
		// and the proxy would reach the denied ranges on Vidra's behalf.
		Proxy:                  nil,
		DialContext:            dial,
		TLSClientConfig:        tlsConfig,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: maxHeaderBytes,
		// Bytes on the wire are the bytes bounded: no gzip bomb, no
		// decompression of an answer that is then refused.
		DisableCompression: true,
	}
	return &http.Client{
		Transport: &schemeGuard{allowHTTP: opts.Guard.AllowHTTP, next: transport},
		// Infrahub's API does not redirect. A redirect would carry the
		// request, X-INFRAHUB-KEY included (Go keeps custom headers across
		// hosts), wherever it leads; the client returns it instead, and
		// the Client refuses it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// schemeGuard refuses a plain http request unless allowed, whatever the
// Client was built with: credentials never travel in clear text by
// mistake.
type schemeGuard struct {
	allowHTTP bool
	next      http.RoundTripper
}

// errPlainHTTP is the refusal of schemeGuard.
var errPlainHTTP = errors.New("plain http is not allowed (--allow-http-destinations)")

func (g *schemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if !g.allowHTTP && !strings.EqualFold(req.URL.Scheme, "https") {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errPlainHTTP
	}
	return g.next.RoundTrip(req)
}

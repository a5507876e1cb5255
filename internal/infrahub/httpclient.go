// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub

import (
	"net/http"

	"github.com/vidra-operator/vidra/internal/destination"
)

// MaxCABytes bounds the PEM bundle of a private CA (HTTPOptions.CAPEM): a
// few dozen certificates. It comes from a tenant's Secret.
const MaxCABytes = 128 << 10

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
func NewHTTPClient(opts HTTPOptions) (*http.Client, error) {
	return nil, errNotImplemented
}

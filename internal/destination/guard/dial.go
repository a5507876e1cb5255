// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// CheckServer refuses a server URL the guard does not allow before any
// connection is made.
func (g *Guard) CheckServer(server string) error {
	u, err := url.Parse(server)
	if err != nil {
		return fmt.Errorf("server %q: %w", server, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !g.allowHTTP {
			return fmt.Errorf("server %s is plain http, which would send credentials and manifests in clear text; use https (or run the operator with --allow-http-destinations)", server)
		}
	default:
		return fmt.Errorf("server %q: scheme %q is not https", server, u.Scheme)
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil {
		if p, denied := g.denied(a); denied {
			return &deniedAddressError{host: u.Hostname(), addr: a, prefix: p}
		}
	}
	return nil
}

// deniedAddressError says that a server resolves to an address of
// --destination-cidr-deny.
type deniedAddressError struct {
	host   string
	addr   netip.Addr
	prefix netip.Prefix
}

func (e *deniedAddressError) Error() string {
	if e.host == e.addr.String() {
		return fmt.Sprintf("address %s is in %s, which remote destinations may not reach (--destination-cidr-deny)", e.addr, e.prefix)
	}
	return fmt.Sprintf("%s resolves to %s, in %s, which remote destinations may not reach (--destination-cidr-deny)", e.host, e.addr, e.prefix)
}

func (g *Guard) denied(a netip.Addr) (netip.Prefix, bool) {
	a = a.Unmap()
	for _, p := range g.deny {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// Dial is the DialContext of remote clients. It resolves the host itself and
// connects to a checked address, never to the name: a name that resolves to
// an allowed address when checked and to a denied one when dialled (DNS
// rebinding) cannot slip through.
func (g *Guard) Dial(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	ips, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, ip := range ips {
		if p, denied := g.denied(ip); denied {
			errs = append(errs, &deniedAddressError{host: host, addr: ip.Unmap(), prefix: p})
			continue
		}
		conn, err := g.dialer.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%s resolves to no address", host)
	}
	return nil, errors.Join(errs...)
}

// NoProxy is the Proxy of remote clients: it keeps remote destinations
// off any proxy of the operator's environment (HTTPS_PROXY). Behind a
// proxy the address checked would be the proxy's, and the proxy would
// reach denied ranges on Vidra's behalf.
func NoProxy(*http.Request) (*url.URL, error) { return nil, nil }

// IsDeniedAddress reports whether err says that a dial was refused because
// the address is in the CIDR deny list.
func IsDeniedAddress(err error) bool {
	var d *deniedAddressError
	return errors.As(err, &d)
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Config limits where remote destinations may lead. A tenant chooses
// the server of a remote destination: without limits Vidra would carry
// requests, from inside the cluster, to any address it can reach.
type Config struct {
	// AllowHTTP accepts servers named with http://, whose requests, bearer
	// tokens and manifests included, travel in clear text.
	AllowHTTP bool
	// DenyCIDRs are the address ranges no remote destination may connect
	// to, checked on the address a server's name resolves to when it is
	// dialled. Nil means DefaultDenyCIDRs; an empty slice denies nothing.
	DenyCIDRs []netip.Prefix
	// SlowAnswer is how long a remote server may take to answer a request
	// a reconcile waits for before Vidra treats it as unavailable; zero
	// means DefaultSlowAnswer.
	SlowAnswer time.Duration
	// CacheObjects and CacheBytes bound the stubs the informers' caches
	// hold of the remote clusters of one namespace together (objects held
	// in full are charged to their owners' namespaces instead); zero means
	// DefaultCacheObjects and DefaultCacheBytes.
	CacheObjects, CacheBytes int64
}

// The default budget of the stubs the caches of one namespace's remote
// clusters hold: the objects with Vidra's marks that no resource of the
// namespace deploying there declares (internal/cachecharge), which no
// tenant's byte budget pays for. A remote cluster may be a server of the
// tenant's own, which can send any number of objects with the right
// labels, of any number of kinds: the operator holds a stub of each, some
// 600 bytes as counted and about 1 KiB of heap (50,000 held 53 MiB in
// TestRemoteClusterCannotFillTheOperatorsCaches). A shared cluster shows each namespace's informers the marked
// objects of every tenant on it, so the number is well above what one
// tenant labels there (the 10,001 of issue 49 cost another tenant
// nothing), and 32 MiB holds it. docs/security.md adds up what else a
// namespace of hostile clusters can cost.
const (
	DefaultCacheObjects = 30_000
	DefaultCacheBytes   = 32 << 20
)

// LocalStubObjects bounds the stubs the caches of the local cluster hold
// (see DefaultCacheObjects): objects with Vidra's marks that no resource
// declares, which any tenant may create in its namespace. Past it the
// local informers stop for a hold, as a remote cluster's do; a count quota
// on the tenants' namespaces keeps far below it.
const LocalStubObjects = 30_000

// DefaultDenyCIDRs are the link-local ranges, where clouds serve instance
// metadata and credentials (169.254.169.254, fd00:ec2::254 aside). Loopback
// stays allowed: a remote destination on the operator's own host is a test
// setup, not an attack on a neighbour.
func DefaultDenyCIDRs() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10")}
}

// ParseCIDRs parses a comma-separated list of CIDRs, as
// --destination-cidr-deny takes them; an empty string is an empty list.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	out := []netip.Prefix{}
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("CIDR %q: %w", f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// DialContext returns the dial function of the clients of remote
// destinations, for other outbound clients that a tenant points somewhere
// (an InfrahubSync's Infrahub): it resolves the host itself and connects
// only to an address outside c.DenyCIDRs, so that a name resolving to an
// allowed address when checked and a denied one when dialled cannot slip
// through. Only c.DenyCIDRs is used.
func (c Config) DialContext() (func(ctx context.Context, network, address string) (net.Conn, error), error) {
	g, err := New(c)
	if err != nil {
		return nil, err
	}
	return g.Dial, nil
}

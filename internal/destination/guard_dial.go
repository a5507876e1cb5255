// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"
	"errors"
	"net"
)

// DialContext returns the dial function of the clients of remote
// destinations, for other outbound clients that a tenant points somewhere
// (an InfrahubSync's Infrahub): it resolves the host itself and connects
// only to an address outside g.DenyCIDRs, so that a name resolving to an
// allowed address when checked and a denied one when dialled cannot slip
// through. Only g.DenyCIDRs is used.
func (g Guard) DialContext() (func(ctx context.Context, network, address string) (net.Conn, error), error) {
	rg, err := newRemoteGuard(g)
	if err != nil {
		return nil, err
	}
	return rg.dial, nil
}

// IsDeniedAddress reports whether err says that a dial was refused because
// the address is in the CIDR deny list.
func IsDeniedAddress(err error) bool {
	var d *deniedAddressError
	return errors.As(err, &d)
}

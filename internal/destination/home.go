// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"

	"k8s.io/client-go/dynamic"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// Home returns a client of the cluster Vidra runs in acting as vr's
// identity, the one its applies use (see actingServiceAccount): what reads
// the ConfigMaps and Secrets of its spec.manifestFrom, which are in its
// namespace there whatever its destination. A resource may thus read
// through Vidra only what its ServiceAccount may read itself.
func (d *Resolver) Home(_ context.Context, vr *v1alpha1.VidraResource) (dynamic.Interface, error) {
	sa, err := actingServiceAccount(vr.Namespace, vr.Spec.ServiceAccountName, d.defaultSA, d.trust)
	if err != nil {
		return nil, err
	}
	if sa == "" {
		return d.local.client, nil
	}
	as, err := d.local.as(vr.Namespace, sa)
	if err != nil {
		return nil, err
	}
	return as.client, nil
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/destination"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// Declares reports whether vr deploys to cluster (here) and, if so,
// whether it declares u, an object of resource gvr there: what the watch
// registry asks, as an object arrives, to cache it in full or as a stub.
// It reads only memory, and is quick: the engine's record of the objects
// its last reconcile of vr had watched (set before that reconcile wrote
// anything, so its own writes arrive declared), and, for a resource not
// reconciled since the operator started, its inventory on the local
// cluster (status.managedResources). A remote cluster's objects of such a
// resource are stubs until it is reconciled; its reads then find a stub
// and read the API server, and the object's next change caches it in
// full.
func (x *WakeIndex) Declares(vr *v1alpha1.VidraResource, cluster string, gvr schema.GroupVersionResource, u *unstructured.Unstructured) (here, declared bool) {
	key := cache.MetaObjectToName(vr)
	if watchedOn, known := x.cluster(key, vr.UID); known {
		here = watchedOn == cluster
		declared = here && x.interested(key, cluster, gvr, u.GetNamespace(), u.GetName())
		if declared || !here {
			return here, declared
		}
	}
	// Not in the manifest its last reconcile saw, or not reconciled yet:
	// what it applied before, until its prune or its first reconcile.
	if cluster != destination.LocalCluster || vr.Spec.Destination.KubeconfigSecretRef != nil || !destination.IsLocalServer(vr.Spec.Destination.Server) {
		return here, false
	}
	object := keyOf(u)
	return true, slices.ContainsFunc(vr.Status.ManagedResources, func(m v1alpha1.ManagedResource) bool { return inventoryKey(m) == object })
}

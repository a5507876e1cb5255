// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"slices"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/destination"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// putOff puts off, once, the reconcile of a key that a rebalance or a
// start (new informers' first lists) queued along with every other, when a
// look at the caches finds every object of its inventory there: the key goes
// to the back of the queue, behind the others, so that the resources with
// an object missing (deleted while no replica served them, or while the
// operator was down) are restored before thousands of intact ones are
// verified. The look sends no request; it reports whether the key was put
// off, queued again for trigger. processNextWorkItem does not ask again for
// a key put off.
func (c *Controller) putOff(ctx context.Context, key cache.ObjectName, trigger Trigger) bool {
	vr, err := c.lister.VidraResources(key.Namespace).Get(key.Name)
	// Only what a look at the local caches can settle: not a resource
	// being deleted, suspended, waiting for others, changed since its last
	// reconcile, or aimed at another cluster.
	if err != nil || vr.DeletionTimestamp != nil || vr.Spec.Suspend || len(vr.Spec.DependsOn) > 0 ||
		!slices.Contains(vr.Finalizers, v1alpha1.Finalizer) || vr.Status.ObservedGeneration != vr.Generation ||
		vr.Spec.Destination.KubeconfigSecretRef != nil || !destination.IsLocalServer(vr.Spec.Destination.Server) {
		return false
	}
	target, err := c.dests.Resolve(ctx, vr)
	if err != nil {
		return false
	}
	if !c.engine.AllCached(ctx, apply.Input{VR: vr, OverrideManagers: c.config().OverrideManagers, Target: target}) {
		return false
	}
	klog.FromContext(ctx).V(4).Info("Every object cached; verified after the resources missing one")
	if !c.share.owns(key) {
		c.miss(key, trigger)
		return true
	}
	c.queue.PutOff(key, trigger)
	return true
}

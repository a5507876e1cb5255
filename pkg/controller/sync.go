// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/destination"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// forget drops everything held for a VidraResource that is gone.
func (c *Controller) forget(key cache.ObjectName) {
	c.registry.Forget(key)
	c.dests.Release(key)
	c.engine.Forget(key)
	c.health.Forget(key)
	c.queue.Drop(key)
}

// syncResult tells processNextWorkItem when to come back.
type syncResult struct {
	requeueAfter   time.Duration
	requeueTrigger Trigger
	conflict       bool
}

// sync reconciles one VidraResource. It returns an error to be retried with
// backoff; failures a retry cannot fix are reported in status and return nil.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) (syncResult, error) {
	cached, err := c.lister.VidraResources(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.forget(key)
		return syncResult{}, nil
	}
	if err != nil {
		return syncResult{}, err
	}
	vr := cached.DeepCopy()
	if vr.DeletionTimestamp != nil {
		return c.finalize(ctx, key, vr)
	}
	if !slices.Contains(vr.Finalizers, v1alpha1.Finalizer) {
		if vr, err = c.setFinalizer(ctx, vr, true); err != nil {
			return syncResult{}, err
		}
	}
	if vr.Spec.Suspend {
		c.registry.Forget(key)
		return syncResult{}, c.writeSuspended(ctx, vr)
	}

	if b := c.checkDependencies(vr); b != nil {
		// Woken by the dependsOn index the moment a dependency changes;
		// the interval stays the safety net.
		return syncResult{requeueAfter: c.interval(vr), requeueTrigger: TriggerInterval}, c.writeBlocked(ctx, vr, b)
	}

	// The deadline covers the work on the destination, not the status
	// write, which reports what was done before it ran out.
	rctx, cancel := destination.WithReconcileDeadline(ctx, c.opts.ReconcileTimeout)
	pass, inventoryCluster := c.reconcile(rctx, vr)
	cancel()
	c.engine.Finish(ctx, pass)
	res := syncResult{requeueAfter: c.interval(vr), requeueTrigger: TriggerInterval}
	for _, e := range pass.Out.Errs {
		res.conflict = res.conflict || e.Conflict
	}
	recheck, err := c.writeStatus(ctx, pass, inventoryCluster)
	if recheck > 0 && (res.requeueAfter <= 0 || recheck < res.requeueAfter) {
		// Waiting for health: the timeout is a deadline to look at, not a
		// poll; a change of health wakes the resource before it.
		res.requeueAfter, res.requeueTrigger = recheck, TriggerHealth
	}
	if err != nil {
		// The engine keeps what this pass applied, for the next pass's
		// inventory: the status that records it was not written.
		return res, err
	}
	c.engine.Recorded(pass)
	if pass.Out.Retryable() {
		errs := make([]error, len(pass.Out.Errs))
		for i, e := range pass.Out.Errs {
			errs[i] = e
		}
		return res, errors.Join(errs...)
	}
	return res, nil
}

// reconcile is the level-triggered core: where the objects go, then the
// apply engine's pass from the manifest to the cluster. It returns the pass
// and the cluster the inventory it leaves in pass.Out is on, for
// status.inventoryCluster.
func (c *Controller) reconcile(ctx context.Context, vr *v1alpha1.VidraResource) (*apply.Pass, *v1alpha1.ClusterReference) {
	in := apply.Input{VR: vr, OverrideManagers: c.config().OverrideManagers}
	if old, moved := previousDestination(vr); moved {
		target, err := c.dests.Resolve(ctx, old)
		in.Previous = &apply.Previous{VR: old, Target: target, Err: err}
	}
	in.Resolve = func(ctx context.Context) (*destination.Target, error) { return c.dests.Resolve(ctx, vr) }
	pass := c.engine.Apply(ctx, in)
	if pass.Out.Behind {
		return pass, vr.Status.InventoryCluster
	}
	return pass, destinationRef(vr)
}

// destinationRef is the cluster of spec.destination, as
// status.inventoryCluster records it: the local cluster has no server.
func destinationRef(vr *v1alpha1.VidraResource) *v1alpha1.ClusterReference {
	ref := &v1alpha1.ClusterReference{KubeconfigSecretRef: vr.Spec.Destination.KubeconfigSecretRef.DeepCopy()}
	if !destination.IsLocalServer(vr.Spec.Destination.Server) {
		ref.Server = vr.Spec.Destination.Server
	}
	return ref
}

// previousDestination returns vr aimed at the cluster its inventory is on,
// and whether that is another cluster than spec.destination's. An inventory
// without a cluster (written before Vidra recorded one) is on the current
// destination.
func previousDestination(vr *v1alpha1.VidraResource) (*v1alpha1.VidraResource, bool) {
	prev := vr.Status.InventoryCluster
	if prev == nil || len(vr.Status.ManagedResources) == 0 || equality.Semantic.DeepEqual(prev, destinationRef(vr)) {
		return vr, false
	}
	old := vr.DeepCopy()
	old.Spec.Destination.Server = prev.Server
	old.Spec.Destination.KubeconfigSecretRef = prev.KubeconfigSecretRef.DeepCopy()
	return old, true
}

// setFinalizer adds or removes Vidra's finalizer with a merge patch that
// carries the resourceVersion read, so it fails rather than overwrite a
// concurrent change of the list.
func (c *Controller) setFinalizer(ctx context.Context, vr *v1alpha1.VidraResource, add bool) (*v1alpha1.VidraResource, error) {
	finalizers := slices.DeleteFunc(slices.Clone(vr.Finalizers), func(f string) bool { return f == v1alpha1.Finalizer })
	if add {
		finalizers = append(finalizers, v1alpha1.Finalizer)
	}
	// An empty list is null in a merge patch: it removes the field.
	var list any = finalizers
	if len(finalizers) == 0 {
		list = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": vr.ResourceVersion, "finalizers": list}})
	if err != nil {
		return nil, fmt.Errorf("encode finalizer patch of VidraResource %s/%s: %w", vr.Namespace, vr.Name, err)
	}
	out, err := c.dests.Local().Meta.Resource(v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.ResourcePlural)).Namespace(vr.Namespace).
		Patch(ctx, vr.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.FinalizerFieldManager})
	if err != nil {
		return nil, fmt.Errorf("update finalizer of VidraResource %s/%s: %w", vr.Namespace, vr.Name, err)
	}
	// The patch was guarded by the resourceVersion read, so the finalizers
	// and the version are all that changed; the answer is metadata only.
	vr = vr.DeepCopy()
	vr.Finalizers, vr.ResourceVersion = out.Finalizers, out.ResourceVersion
	return vr, nil
}

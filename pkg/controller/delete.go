// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// deletionRecheck is when a deletion that still waits for its objects to be
// gone looks again once the work queue's backoff has given up on it.
const deletionRecheck = time.Minute

// finalize runs when a VidraResource is being deleted: per its deletion
// policy it deletes or releases every managed object, waits until deleted
// objects are gone, and only then removes the finalizer.
//
// Deletion never hangs on a destination that cannot be reached for good. With
// Delete, an unavailable destination is retried with backoff until it
// answers; switching the policy to Orphan finishes at once, whatever the
// destination's state. When the kubeconfig Secret of a remote destination is
// gone, nothing can ever reach the objects again, and the finalizer is
// removed too. Both leave objects behind, which a Warning Event names.
func (c *Controller) finalize(ctx context.Context, key cache.ObjectName, vr *v1alpha1.VidraResource) (syncResult, error) {
	logger := klog.FromContext(ctx)
	if !slices.Contains(vr.Finalizers, v1alpha1.Finalizer) {
		c.forget(key)
		return syncResult{}, nil
	}
	// The resource's watches stay until it is finalized: the cleanup
	// narrows them to the objects it waits for, whose deletion wakes it.
	del := vr.Spec.DeletionPolicy != v1alpha1.DeletionPolicyOrphan

	// The inventory may still be on a destination the resource has moved
	// away from; its objects are there.
	previous, moved := previousDestination(vr)
	// A reconcile's deadline holds for a deletion too: a tenant's server
	// answering each request just under the slow-answer limit would
	// otherwise hold a worker for as long as the inventory takes, over an
	// hour for 1,000 objects. Events and the status are written on ctx.
	rctx, cancel := destination.WithReconcileDeadline(ctx, c.opts.ReconcileTimeout)
	defer cancel()
	target, err := c.dests.Resolve(rctx, previous)
	// Nothing recorded as applied: the destination is asked, as below, only
	// for what an interrupted first reconcile may have left, and a
	// destination that cannot answer (refused credentials, a
	// ServiceAccount without rights) does not hold the deletion.
	empty := len(vr.Status.ManagedResources) == 0
	switch {
	case err != nil && empty:
		return c.abandon(ctx, key, vr, fmt.Sprintf("nothing was recorded as applied, and the destination cannot be checked: %v", err), nil)
	case err != nil && destination.IsRefused(err):
		// Vidra may not act for it, so it never applied anything as itself.
		return c.abandon(ctx, key, vr, fmt.Sprintf("Vidra may not act for this resource: %v", err), vr.Status.ManagedResources)
	case err != nil && destination.IsSecretGone(err):
		return c.abandon(ctx, key, vr, fmt.Sprintf("the destination's credentials are gone: %v", err), vr.Status.ManagedResources)
	case err != nil && !del:
		return c.abandon(ctx, key, vr, fmt.Sprintf("the destination is unavailable: %v", destination.Readable(err)), vr.Status.ManagedResources)
	case err != nil:
		msg := fmt.Sprintf("Cannot clean up managed objects, retrying with backoff (set spec.deletionPolicy to Orphan to leave them): %v", destination.Readable(err))
		c.events.Event(vr, true, "CleanupFailed", "%s", msg)
		return syncResult{}, errors.Join(fmt.Errorf("resolve destination to clean up VidraResource %s/%s: %w", vr.Namespace, vr.Name, err),
			c.writeDeleting(ctx, vr, msg, nil))
	}
	left, err := c.engine.Cleanup(rctx, vr, target, del, !moved)
	pending, failed := left.Pending, left.Failed
	if oot := destination.OutOfTime(rctx); oot != nil && !empty && len(failed) > 0 {
		// Whatever the policy: Orphan, too, must not leave the marks of
		// the objects it did not get to. The inventory keeps only what a
		// next try has to look at, so that each try gets further, however
		// many objects one try's time allows.
		left := slices.Concat(failed, pending)
		msg := fmt.Sprintf("Cleaning up managed objects is not finished, retrying with backoff: %v; %d of %s left to look at",
			oot, len(left), wording.Count(max(len(left), len(vr.Status.ManagedResources)), "object"))
		c.events.Event(vr, true, "CleanupFailed", "%s", msg)
		return syncResult{}, errors.Join(fmt.Errorf("clean up VidraResource %s/%s: %w", vr.Namespace, vr.Name, oot),
			c.writeDeleting(ctx, vr, msg, left))
	}
	if err != nil && empty {
		c.events.Event(vr, true, "CleanupSkipped", "Nothing was recorded as applied; checking the destination for objects of an interrupted first reconcile failed, so any are left in place: %v", err)
	} else if err != nil {
		if !del {
			// Orphan leaves the objects anyway; their marks are a courtesy
			// that must not hold the deletion.
			return c.abandon(ctx, key, vr, fmt.Sprintf("Vidra's marks could not be removed: %v", err), failed)
		}
		msg := fmt.Sprintf("Cleaning up managed objects failed, retrying with backoff (set spec.deletionPolicy to Orphan to leave them): %v", destination.Readable(err))
		c.events.Event(vr, true, "CleanupFailed", "%s", msg)
		return syncResult{}, errors.Join(err, c.writeDeleting(ctx, vr, msg, nil))
	}
	if len(pending) > 0 {
		logger.V(2).Info("Waiting for managed objects to be deleted", "pending", len(pending), "recheck", left.Recheck)
		written := c.writeDeleting(ctx, vr, truncate(fmt.Sprintf("Waiting for %s to be deleted (a finalizer of theirs may hold them): %s",
			wording.Count(len(pending), "managed object"), apply.InventoryNames(pending))), nil)
		if left.Recheck > 0 && written == nil {
			// The API server's cleanup of a CRD among them is due to be
			// requeued then (the engine's requeueCRDCleanup).
			return syncResult{requeueAfter: left.Recheck, requeueTrigger: TriggerRetry}, nil
		}
		// An error, so that the wait backs off through the work queue's rate
		// limiter: an object with a slow finalizer must not cost a request
		// per second for as long as it takes. The backoff is only the
		// safety net: the delete event of an object found held by a
		// finalizer wakes the resource (the engine awaits it), so the wait
		// ends when the last of them goes.
		return syncResult{requeueAfter: deletionRecheck, requeueTrigger: TriggerRetry}, errors.Join(
			fmt.Errorf("VidraResource %s/%s waits for %d managed objects to be deleted", vr.Namespace, vr.Name, len(pending)), written)
	}
	if del {
		// The Kept and HandedOver Events of the passes name the objects let
		// go; they are not counted as deleted.
		released := c.engine.Released(vr)
		msg := "Deleted " + wording.Count(max(0, len(vr.Status.ManagedResources)-released), "managed object")
		if released > 0 {
			msg += fmt.Sprintf(" and let %d go without deleting %s (see the Kept and HandedOver Events)", released, wording.Agree(released, "it", "them"))
		}
		c.events.Event(vr, false, "Deleted", "%s", msg)
	} else {
		c.events.Event(vr, false, "Orphaned", "Left %s in place without Vidra's marks", wording.Count(len(vr.Status.ManagedResources), "managed object"))
	}
	if _, err := c.setFinalizer(ctx, vr, false); err != nil {
		return syncResult{}, err
	}
	logger.Info("Finalized", "deletionPolicy", vr.Spec.DeletionPolicy)
	c.forget(key)
	return syncResult{}, nil
}

// abandon removes the finalizer without the cleanup the policy asks for,
// with a Warning Event naming what was left behind and where, so that a
// person can finish by hand.
func (c *Controller) abandon(ctx context.Context, key cache.ObjectName, vr *v1alpha1.VidraResource, why string, left []v1alpha1.ManagedResource) (syncResult, error) {
	if len(left) > 0 {
		where := "the local cluster"
		if s := vr.Spec.Destination.Server; !destination.IsLocalServer(s) {
			where = s
		} else if ref := vr.Spec.Destination.KubeconfigSecretRef; ref != nil {
			where = "the cluster of Secret " + vr.Namespace + "/" + ref.Name
		}
		c.events.Event(vr, true, "LeftBehind", "Finalizer removed without cleanup, %s; left behind on %s: %s", why, where, truncate(apply.InventoryNames(left)))
	}
	if _, err := c.setFinalizer(ctx, vr, false); err != nil {
		return syncResult{}, err
	}
	klog.FromContext(ctx).Info("Finalized without cleanup", "deletionPolicy", vr.Spec.DeletionPolicy, "reason", why, "leftBehind", len(left))
	c.forget(key)
	return syncResult{}, nil
}

// writeDeleting shows in the status a deletion that has not finished, and
// why: the Ready condition of the last reconcile would otherwise go on
// saying all is well (kubectl get shows it) while the resource hangs in
// deletion, and the Event alone scrolls away. left, if not nil, replaces
// the inventory: what the deletion has still to look at.
func (c *Controller) writeDeleting(ctx context.Context, vr *v1alpha1.VidraResource, msg string, left []v1alpha1.ManagedResource) error {
	now := metav1.NewTime(c.clock.Now())
	st := vr.Status.DeepCopy()
	if left != nil {
		st.ManagedResources, st.ManagedCount = left, int32(len(left))
	}
	// Marking the resource for deletion raised its generation.
	st.ObservedGeneration = vr.Generation
	set := func(t string, s metav1.ConditionStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: v1alpha1.ReasonDeleting, Message: truncate(msg), ObservedGeneration: vr.Generation, LastTransitionTime: now,
		})
	}
	set(v1alpha1.ConditionReady, metav1.ConditionFalse)
	set(v1alpha1.ConditionReconciling, metav1.ConditionTrue)
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionStalled)
	if equality.Semantic.DeepEqual(vr.Status, *st) {
		return nil
	}
	vr = vr.DeepCopy()
	vr.Status = *st
	return c.updateStatus(ctx, vr)
}

package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/klog/v2"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// deletionPoll is how often a deletion checks whether the managed objects
// are gone; namespaces and objects with finalizers take a few seconds.
const deletionPoll = time.Second

// finalize runs when a VidraResource is being deleted: per its deletion
// policy it deletes or releases every managed object, waits until deleted
// objects are gone, and only then removes the finalizer.
func (c *Controller) finalize(ctx context.Context, key cacheKey, vr *v1alpha1.VidraResource, st *resourceState) (syncResult, error) {
	logger := klog.FromContext(ctx)
	if !slices.Contains(vr.Finalizers, v1alpha1.Finalizer) {
		c.forget(key)
		return syncResult{}, nil
	}
	c.registry.Forget(key)
	del := vr.Spec.DeletionPolicy != v1alpha1.DeletionPolicyOrphan

	dest, err := c.dests.resolve(vr, c.opts.DefaultServiceAccount)
	if err != nil {
		return syncResult{}, fmt.Errorf("resolve destination to clean up: %w", err)
	}
	items := slices.Clone(vr.Status.ManagedResources)
	// Objects applied by a reconcile whose status write never happened (a
	// crash in between) are not in the inventory; the manifest names them.
	if objs, errs := st.parse(vr); len(errs) == 0 {
		inv := inventorySet(items)
		for _, o := range objs {
			u := mark(o.Object, vr)
			if u.GetNamespace() == "" {
				if ns, err := dest.mapper.namespaced(u.GroupVersionKind()); err == nil && ns {
					u.SetNamespace(defaultNamespace(vr))
				}
			}
			if !inv[keyOf(u)] {
				items = append(items, managedResource(u))
			}
		}
	}

	var errs []error
	pending := 0
	for _, m := range items {
		done, err := c.release(ctx, dest, vr, m, del)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if done && del {
			pending++
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.event(vr, true, "CleanupFailed", "Cleaning up managed objects failed: %v", err)
		return syncResult{}, err
	}
	if pending > 0 {
		logger.V(2).Info("Waiting for managed objects to be deleted", "pending", pending)
		return syncResult{requeueAfter: deletionPoll, requeueTrigger: TriggerRetry}, nil
	}
	if del {
		c.event(vr, false, "Deleted", "Deleted %d managed objects", len(vr.Status.ManagedResources))
	} else {
		c.event(vr, false, "Orphaned", "Left %d managed objects in place without Vidra's marks", len(vr.Status.ManagedResources))
	}
	if _, err := c.setFinalizer(ctx, vr, false); err != nil {
		return syncResult{}, err
	}
	logger.Info("Finalized", "deletionPolicy", vr.Spec.DeletionPolicy)
	c.forget(key)
	return syncResult{}, nil
}

func defaultNamespace(vr *v1alpha1.VidraResource) string {
	if vr.Spec.Destination.Namespace != "" {
		return vr.Spec.Destination.Namespace
	}
	return vr.Namespace
}

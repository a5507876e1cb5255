package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

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
func (c *Controller) finalize(ctx context.Context, key cacheKey, vr *v1alpha1.VidraResource) (syncResult, error) {
	logger := klog.FromContext(ctx)
	if !slices.Contains(vr.Finalizers, v1alpha1.Finalizer) {
		c.forget(key)
		return syncResult{}, nil
	}
	c.registry.Forget(key)
	del := vr.Spec.DeletionPolicy != v1alpha1.DeletionPolicyOrphan

	// The inventory may still be on a destination the resource has moved
	// away from; its objects are there.
	target, moved := previousDestination(vr)
	dest, err := c.dests.resolve(ctx, target, c.opts.DefaultServiceAccount)
	// Nothing recorded as applied: the destination is asked, as below, only
	// for what an interrupted first reconcile may have left, and a
	// destination that cannot answer (refused credentials, a
	// ServiceAccount without rights) does not hold the deletion.
	empty := len(vr.Status.ManagedResources) == 0
	switch {
	case err != nil && empty:
		return c.abandon(ctx, key, vr, fmt.Sprintf("nothing was recorded as applied, and the destination cannot be checked: %v", err), nil)
	case err != nil && isRefused(err):
		// Vidra may not act for it, so it never applied anything as itself.
		return c.abandon(ctx, key, vr, fmt.Sprintf("Vidra may not act for this resource: %v", err), vr.Status.ManagedResources)
	case err != nil && isSecretGone(err):
		return c.abandon(ctx, key, vr, fmt.Sprintf("the destination's credentials are gone: %v", err), vr.Status.ManagedResources)
	case err != nil && !del:
		return c.abandon(ctx, key, vr, fmt.Sprintf("the destination is unavailable: %v", err), vr.Status.ManagedResources)
	case err != nil:
		c.event(vr, true, "CleanupFailed", "Cannot clean up managed objects, retrying with backoff (set spec.deletionPolicy to Orphan to leave them): %v", err)
		return syncResult{}, fmt.Errorf("resolve destination to clean up VidraResource %s/%s: %w", vr.Namespace, vr.Name, err)
	}
	items := slices.Clone(vr.Status.ManagedResources)
	// Objects applied by a reconcile whose status write never happened (a
	// crash in between) are not in the inventory; the manifest names them.
	if objs, errs := c.parsed.parse(key, vr); len(errs) == 0 && !moved {
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
	var failed []v1alpha1.ManagedResource
	pending := 0
	terminating := namespacesTerminating(ctx, dest)
	for _, m := range items {
		if del && m.Namespace != "" && terminating(m.Namespace) {
			// The namespace's deletion removes the object anyway, and
			// finishes only once every finalizer in it has run.
			continue
		}
		what, err := c.release(ctx, dest, vr, m, del)
		if err != nil {
			errs = append(errs, err)
			failed = append(failed, m)
			continue
		}
		if what == releasedDeleted {
			pending++
		}
	}
	if err := errors.Join(errs...); err != nil && empty {
		c.event(vr, true, "CleanupSkipped", "Nothing was recorded as applied; checking the destination for objects of an interrupted first reconcile failed, so any are left in place: %v", err)
	} else if err != nil {
		if !del {
			// Orphan leaves the objects anyway; their marks are a courtesy
			// that must not hold the deletion.
			return c.abandon(ctx, key, vr, fmt.Sprintf("Vidra's marks could not be removed: %v", err), failed)
		}
		c.event(vr, true, "CleanupFailed", "Cleaning up managed objects failed, retrying with backoff (set spec.deletionPolicy to Orphan to leave them): %v", err)
		return syncResult{}, err
	}
	if pending > 0 {
		// An error, so that the wait backs off through the work queue's rate
		// limiter: an object with a slow finalizer must not cost a request
		// per second for as long as it takes. Vidra's own deletions do not
		// wake the resource (they are expected writes).
		logger.V(2).Info("Waiting for managed objects to be deleted", "pending", pending)
		return syncResult{requeueAfter: deletionRecheck, requeueTrigger: TriggerRetry},
			fmt.Errorf("VidraResource %s/%s waits for %d managed objects to be deleted", vr.Namespace, vr.Name, pending)
	}
	if del {
		c.event(vr, false, "Deleted", "Deleted %s", count(len(vr.Status.ManagedResources), "managed object"))
	} else {
		c.event(vr, false, "Orphaned", "Left %s in place without Vidra's marks", count(len(vr.Status.ManagedResources), "managed object"))
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
func (c *Controller) abandon(ctx context.Context, key cacheKey, vr *v1alpha1.VidraResource, why string, left []v1alpha1.ManagedResource) (syncResult, error) {
	if len(left) > 0 {
		where := "the local cluster"
		if s := vr.Spec.Destination.Server; !isLocalServer(s) {
			where = s
		} else if ref := vr.Spec.Destination.KubeconfigSecretRef; ref != nil {
			where = "the cluster of Secret " + vr.Namespace + "/" + ref.Name
		}
		c.event(vr, true, "LeftBehind", "Finalizer removed without cleanup, %s; left behind on %s: %s", why, where, truncate(inventoryNames(left)))
	}
	if _, err := c.setFinalizer(ctx, vr, false); err != nil {
		return syncResult{}, err
	}
	klog.FromContext(ctx).Info("Finalized without cleanup", "deletionPolicy", vr.Spec.DeletionPolicy, "reason", why, "leftBehind", len(left))
	c.forget(key)
	return syncResult{}, nil
}

// namespacesTerminating returns a test of whether a namespace of the
// destination is being deleted, which reads each namespace once. A
// namespace that cannot be read (an impersonated ServiceAccount may not
// read namespaces) counts as not terminating: its objects are deleted and
// waited for as any.
func namespacesTerminating(ctx context.Context, dest *destination) func(string) bool {
	seen := map[string]bool{}
	return func(ns string) bool {
		t, ok := seen[ns]
		if !ok {
			obj, err := dest.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, ns, metav1.GetOptions{})
			t = err == nil && obj.GetDeletionTimestamp() != nil
			seen[ns] = t
		}
		return t
	}
}

func defaultNamespace(vr *v1alpha1.VidraResource) string {
	if vr.Spec.Destination.Namespace != "" {
		return vr.Spec.Destination.Namespace
	}
	return vr.Namespace
}

package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// prune deletes (or, with spec.prune false, releases) the objects of the
// inventory that left the manifest. Only objects that still carry this
// resource's owner-uid label are touched. It returns the inventory entries
// it could not settle, to be kept and tried again.
func (c *Controller) prune(ctx context.Context, r *run, desired map[objectKey]bool) []v1alpha1.ManagedResource {
	var kept []v1alpha1.ManagedResource
	for _, m := range r.vr.Status.ManagedResources {
		if desired[inventoryKey(m)] {
			continue
		}
		doPrune := r.vr.Spec.Prune == nil || *r.vr.Spec.Prune
		done, err := c.release(ctx, r.dest, r.vr, m, doPrune)
		if err != nil {
			c.metrics.Prunes.WithLabelValues("error").Inc()
			r.out.errs = append(r.out.errs, &objectError{key: inventoryKey(m), index: -1, reason: v1alpha1.ReasonPruneFailed, retry: true, err: err})
			kept = append(kept, m)
			continue
		}
		if done {
			if doPrune {
				c.metrics.Prunes.WithLabelValues("success").Inc()
			}
			r.out.pruned = append(r.out.pruned, inventoryKey(m).String())
			r.out.changed++
		}
	}
	return kept
}

// release deletes one managed object (del) or strips Vidra's marks from it.
// done is false when there was nothing of this resource's to release: the
// object is gone, its kind no longer exists, or it belongs to someone else.
func (c *Controller) release(ctx context.Context, dest *destination, vr *v1alpha1.VidraResource, m v1alpha1.ManagedResource, del bool) (done bool, err error) {
	gv, err := schema.ParseGroupVersion(m.APIVersion)
	if err != nil {
		return false, nil
	}
	mapping, err := dest.mapper.mapping(gv.WithKind(m.Kind))
	if meta.IsNoMatchError(err) {
		// The kind is gone (its CRD was deleted), and its objects with it.
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("map %s: %w", inventoryKey(m), err)
	}
	client := dest.client.Resource(mapping.Resource).Namespace(m.Namespace)
	live, err := client.Get(ctx, m.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", inventoryKey(m), err)
	}
	if live.GetLabels()[v1alpha1.OwnerUIDLabel] != string(vr.UID) {
		return false, nil
	}
	ref := watchregistry.Ref{Cluster: dest.cluster, GVR: mapping.Resource}
	logger := klog.FromContext(ctx).WithValues("object", inventoryKey(m).String())
	if !del {
		logger.V(2).Info("Releasing object")
		return true, stripMarks(ctx, client, live.GetKind(), live.GetName())
	}
	if live.GetDeletionTimestamp() != nil {
		return true, nil
	}
	logger.V(2).Info("Deleting object")
	c.registry.ExpectDelete(ref, m.Namespace, m.Name)
	uid := live.GetUID()
	bg := metav1.DeletePropagationBackground
	err = client.Delete(ctx, m.Name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("delete %s: %w", inventoryKey(m), err)
	}
	return true, nil
}

// stripMarks removes Vidra's labels and annotation, so that the object is
// left to whoever manages it next and no Vidra watch sees it any more.
func stripMarks(ctx context.Context, client dynamic.ResourceInterface, kind, name string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:null,%q:null},"annotations":{%q:null}}}`,
		v1alpha1.ManagedByLabel, v1alpha1.OwnerUIDLabel, v1alpha1.OwnedByAnnotation)
	_, err := client.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.FieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release %s %s: %w", kind, name, err)
	}
	return nil
}

package controller

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// released is what release did with one object.
type released int

const (
	// releasedNothing: nothing of this resource's was there to release (the
	// object is gone, its kind no longer exists, or it is someone else's).
	releasedNothing released = iota
	// releasedDeleted: the object was deleted, or is being deleted.
	releasedDeleted
	// releasedStripped: Vidra's marks were removed; the object stays.
	releasedStripped
	// releasedHandedOver: another VidraResource declares the object, and
	// now owns it.
	releasedHandedOver
)

// prune deletes (or, with spec.prune false, releases) the objects of the
// inventory that left the manifest. Only objects that still carry this
// resource's owner-uid label are touched, and a Namespace or CRD is deleted
// only when the resource allows it. It returns the inventory entries it
// could not settle, to be kept and tried again.
func (c *Controller) prune(ctx context.Context, r *run, desired map[objectKey]bool) []v1alpha1.ManagedResource {
	var kept []v1alpha1.ManagedResource
	doPrune := r.vr.Spec.Prune == nil || *r.vr.Spec.Prune
	for _, m := range r.inventory {
		key := inventoryKey(m)
		if desired[key] {
			continue
		}
		if doPrune && holdsOthers(key) && !r.vr.Spec.PruneNamespacesAndCRDs && !c.claimed(r.dest.cluster, key, r.vr.UID) {
			r.out.errs = append(r.out.errs, &objectError{key: key, index: -1, reason: v1alpha1.ReasonPruneRefused,
				err: fmt.Errorf("left the manifest but was not deleted: deleting a %s deletes everything in it, whoever owns it; set spec.pruneNamespacesAndCRDs to true to let Vidra delete it, or delete it by hand and Vidra forgets it", key.kind)})
			kept = append(kept, m)
			continue
		}
		what, err := c.release(ctx, r.dest, r.vr, m, doPrune)
		if err != nil {
			c.metrics.Prunes.WithLabelValues("error").Inc()
			r.out.errs = append(r.out.errs, &objectError{key: key, index: -1, reason: v1alpha1.ReasonPruneFailed, retry: true, err: err})
			kept = append(kept, m)
			continue
		}
		switch what {
		case releasedDeleted:
			c.metrics.Prunes.WithLabelValues("success").Inc()
			r.out.pruned = append(r.out.pruned, key.String())
		case releasedStripped:
			r.out.released = append(r.out.released, key.String())
		}
		if what != releasedNothing {
			r.out.changed++
		}
	}
	return kept
}

// claimed reports whether another live VidraResource declares the object,
// which release then hands over rather than deletes.
func (c *Controller) claimed(cluster string, key objectKey, uid types.UID) bool {
	_, ok := c.claimant(cluster, key, uid)
	return ok
}

// holdsOthers reports the kinds whose deletion deletes other objects, which
// need not be Vidra's: a Namespace takes its objects along, a
// CustomResourceDefinition its custom resources.
func holdsOthers(k objectKey) bool {
	return (k.group == "" && k.kind == "Namespace") || (k.group == "apiextensions.k8s.io" && k.kind == "CustomResourceDefinition")
}

// release deletes one managed object (del) or strips Vidra's marks from it.
// When another live VidraResource declares the object, it is handed over to
// that resource instead, whatever del says: deleting it would take it from
// under its other declarer, and stripping the marks would leave it
// unmanaged, which that resource must not adopt.
func (c *Controller) release(ctx context.Context, dest *destination, vr *v1alpha1.VidraResource, m v1alpha1.ManagedResource, del bool) (released, error) {
	gv, err := schema.ParseGroupVersion(m.APIVersion)
	if err != nil {
		return releasedNothing, nil
	}
	mapping, err := dest.mapper.mapping(gv.WithKind(m.Kind))
	if meta.IsNoMatchError(err) {
		// The kind is gone (its CRD was deleted), and its objects with it.
		return releasedNothing, nil
	}
	if err != nil {
		return releasedNothing, fmt.Errorf("map %s: %w", inventoryKey(m), err)
	}
	client := dest.client.Resource(mapping.Resource).Namespace(m.Namespace)
	live, err := client.Get(ctx, m.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return releasedNothing, nil
	}
	if err != nil {
		return releasedNothing, fmt.Errorf("read %s: %w", inventoryKey(m), err)
	}
	if live.GetLabels()[v1alpha1.OwnerUIDLabel] != string(vr.UID) {
		return releasedNothing, nil
	}
	logger := klog.FromContext(ctx).WithValues("object", inventoryKey(m).String())
	if live.GetDeletionTimestamp() == nil {
		if to, ok := c.claimant(dest.cluster, inventoryKey(m), vr.UID); ok {
			if err := handOver(ctx, client, live, to); err != nil {
				return releasedNothing, err
			}
			logger.Info("Handed object over to another VidraResource that declares it", "to", to.Namespace+"/"+to.Name)
			c.event(vr, false, v1alpha1.ReasonHandedOver, "Handed %s over to VidraResource %s/%s, which declares it too", inventoryKey(m), to.Namespace, to.Name)
			c.enqueue(cacheKey{Namespace: to.Namespace, Name: to.Name}, TriggerEvent)
			return releasedHandedOver, nil
		}
	}
	if !del {
		logger.V(2).Info("Releasing object")
		return releasedStripped, stripMarks(ctx, client, live.GetKind(), live.GetName())
	}
	if live.GetDeletionTimestamp() != nil {
		return releasedDeleted, nil
	}
	logger.V(2).Info("Deleting object")
	c.registry.ExpectDelete(watchregistry.Ref{Cluster: dest.cluster, GVR: mapping.Resource}, live)
	uid := live.GetUID()
	bg := metav1.DeletePropagationBackground
	err = client.Delete(ctx, m.Name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return releasedNothing, fmt.Errorf("delete %s: %w", inventoryKey(m), err)
	}
	return releasedDeleted, nil
}

// handOver rewrites the marks of live to name the VidraResource to, in one
// patch guarded by the resourceVersion read: the object is never without an
// owner, never deleted, and keeps its UID. The new owner's next apply,
// under the same field manager, owns its fields from then on.
func handOver(ctx context.Context, client dynamic.ResourceInterface, live *unstructured.Unstructured, to *v1alpha1.VidraResource) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": live.GetResourceVersion(),
		"labels":          map[string]any{v1alpha1.OwnerUIDLabel: string(to.UID)},
		"annotations":     map[string]any{v1alpha1.OwnedByAnnotation: to.Namespace + "/" + to.Name},
	}})
	if err != nil {
		return err
	}
	_, err = client.Patch(ctx, live.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.HandoverFieldManager})
	if err != nil {
		return fmt.Errorf("hand %s %s over to VidraResource %s/%s: %w", live.GetKind(), live.GetName(), to.Namespace, to.Name, err)
	}
	return nil
}

// stripMarks removes Vidra's labels and annotation, so that the object is
// left to whoever manages it next and no Vidra watch sees it any more. Its
// field manager is not Vidra's apply manager, so the released object never
// looks like one Vidra applied and keeps.
func stripMarks(ctx context.Context, client dynamic.ResourceInterface, kind, name string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      map[string]any{v1alpha1.ManagedByLabel: nil, v1alpha1.OwnerUIDLabel: nil},
		"annotations": map[string]any{v1alpha1.OwnedByAnnotation: nil},
	}})
	if err != nil {
		return err
	}
	_, err = client.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.ReleaseFieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release %s %s: %w", kind, name, err)
	}
	return nil
}

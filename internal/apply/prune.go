// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/shard"
	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// letGoResult is what letGo did with one object.
type letGoResult int

const (
	// nothingToLetGo: nothing of this resource's was there (the object is
	// gone, its kind no longer exists, or it is someone else's).
	nothingToLetGo letGoResult = iota
	// deleted: the object was deleted, or is being deleted.
	deleted
	// released: Vidra's marks were removed; the object stays.
	released
	// handedOver: another VidraResource declares the object, and now owns
	// it.
	handedOver
	// keptByAnnotation: released, not deleted, because the object's
	// prune: disabled annotation asks so.
	keptByAnnotation
	// pruneRefused: a Namespace or CRD the resource may not prune, and that
	// nobody who may manage it declares; it stays.
	pruneRefused
)

// maxIdentitiesReviewed bounds the identities whose access to an object is
// reviewed when it is let go (two reviews each, three for RBAC kinds), and
// maxClaimantsConsidered the claimants looked at, each told when refused:
// the path runs when an object leaves a resource, which many resources
// claiming one object must not turn into a storm. Past them the object
// goes as if nobody else declared it, and the claimants that may manage it
// create it again. An identity is reviewed once, whatever the number of
// its resources, and the resources of the namespace letting the object go
// and of the object's own are looked at first: a tenant that may read an
// object cannot crowd its natural heirs out with resources named to sort
// first.
const (
	maxIdentitiesReviewed  = 4
	maxClaimantsConsidered = 16
)

// prune deletes (or, with spec.prune false, releases) the objects of the
// inventory that left the manifest. Only objects that still carry this
// resource's owner-uid label are touched, and a Namespace or CRD is deleted
// only when the resource allows it. It returns the inventory entries it
// could not settle, to be kept and tried again.
func (e *Engine) prune(ctx context.Context, pass *Pass, desired map[ObjectKey]bool) []v1alpha1.ManagedResource {
	var kept []v1alpha1.ManagedResource
	for _, m := range pass.Inventory {
		key := inventoryKey(m)
		if desired[key] {
			continue
		}
		del, refuse := pruneDeletes(pass.VR, key)
		what, err := e.letGo(ctx, pass.Target, pass.VR, m, del, refuse)
		if err != nil {
			e.metrics.Prunes.WithLabelValues("error").Inc()
			pass.Out.Errs = append(pass.Out.Errs, &ObjectError{Key: key, Index: -1, Reason: v1alpha1.ReasonPruneFailed, Retry: true, Err: err})
			kept = append(kept, m)
			continue
		}
		switch what {
		case pruneRefused:
			pass.Out.Errs = append(pass.Out.Errs, &ObjectError{Key: key, Index: -1, Reason: v1alpha1.ReasonPruneRefused,
				Err: fmt.Errorf("left the manifest but was not deleted: deleting a %s deletes everything in it, whoever owns it; set spec.pruneNamespacesAndCRDs to true to let Vidra delete it, or delete it by hand and Vidra forgets it", key.kind)})
			kept = append(kept, m)
			continue
		case deleted:
			e.metrics.Prunes.WithLabelValues("success").Inc()
			pass.Out.Pruned = append(pass.Out.Pruned, key.String())
		case released:
			pass.Out.Released = append(pass.Out.Released, key.String())
		case keptByAnnotation:
			pass.Out.Kept = append(pass.Out.Kept, key.String())
		}
		if what != nothingToLetGo {
			pass.Out.Changed++
		}
	}
	return kept
}

// holdsOthers reports the kinds whose deletion deletes other objects, which
// need not be Vidra's: a Namespace takes its objects along, a
// CustomResourceDefinition its custom resources.
func holdsOthers(k ObjectKey) bool {
	return (k.group == "" && k.kind == "Namespace") || (k.group == "apiextensions.k8s.io" && k.kind == "CustomResourceDefinition")
}

// pruneDeletes says how the prune of vr lets the object of k go: deleted
// (del: spec.prune is not false) or released, and refused when it is a
// Namespace or CRD the resource may not delete. Plan asks it too.
func pruneDeletes(vr *v1alpha1.VidraResource, k ObjectKey) (del, refuse bool) {
	del = vr.Spec.Prune == nil || *vr.Spec.Prune
	return del, del && deleteRefused(vr, k)
}

// deleteRefused reports whether vr may not delete the object of k to prune
// or to recreate it: a Namespace or CRD, unless spec.pruneNamespacesAndCRDs
// allows it.
func deleteRefused(vr *v1alpha1.VidraResource, k ObjectKey) bool {
	return holdsOthers(k) && !vr.Spec.PruneNamespacesAndCRDs
}

// letGo deletes one managed object (del) or strips Vidra's marks from it.
// When another live VidraResource declares the object and its identity may
// manage it, it is handed over to that resource instead, whatever del says:
// deleting it would take it from under its other declarer, and stripping the
// marks would leave it unmanaged, which that resource must not adopt. With
// refuse (a Namespace or CRD the resource may not prune), an object nobody
// may take over is left as it is (pruneRefused). What it does is
// decideLetGo's decision, the one Plan shows kubectl vidra diff.
func (e *Engine) letGo(ctx context.Context, dest *destination.Target, vr *v1alpha1.VidraResource, m v1alpha1.ManagedResource, del, refuse bool) (letGoResult, error) {
	held, err := e.heldObject(ctx, dest, vr, m)
	if held == nil || err != nil {
		return nothingToLetGo, err
	}
	key := inventoryKey(m)
	logger := klog.FromContext(ctx).WithValues("object", key.String())
	var refused []handoverRefusal
	if held.live.GetDeletionTimestamp() == nil {
		var heir *claim
		if heir, refused, err = e.handOverToHeir(ctx, logger, dest, vr, m, held); err != nil {
			return nothingToLetGo, err
		}
		if heir != nil {
			e.handoverRefused(ctx, vr, key, refused, outcomeOf(handedOver, vr, heir.vr))
			return handedOver, nil
		}
	}
	// The hand-over was decided above, with the review it needs.
	var what letGoResult
	switch action, _ := decideLetGo(key, held.live, false, del, refuse); action {
	case PlanPruneRefused:
		what = pruneRefused
	case PlanRelease:
		logger.V(2).Info("Releasing object")
		what, err = released, stripMarks(ctx, held.client, e.registry.BeginWrite(held.ref, held.live), key.kind, held.live)
	case PlanKeep:
		logger.V(2).Info("Releasing object instead of deleting it", "annotation", v1alpha1.PrunePolicyAnnotation)
		what, err = keptByAnnotation, stripMarks(ctx, held.client, e.registry.BeginWrite(held.ref, held.live), key.kind, held.live)
	default:
		what, err = e.remove(ctx, logger, held, key, vr.DeletePropagation())
	}
	if err != nil {
		return nothingToLetGo, err
	}
	if what == deleted && held.live.GetDeletionTimestamp() != nil {
		e.requeueCRDCleanup(ctx, logger, vr, held, key)
	}
	e.handoverRefused(ctx, vr, key, refused, outcomeOf(what, vr, nil))
	return what, nil
}

// held is an object of an inventory entry as letGo reads it, with the
// client that writes it.
type held struct {
	client metadata.ResourceInterface
	ref    watchregistry.Ref
	live   *metav1.PartialObjectMetadata
}

// heldObject reads the object of inventory entry m, when it exists and is
// vr's: nil when there is nothing of vr's to let go.
func (e *Engine) heldObject(ctx context.Context, dest *destination.Target, vr *v1alpha1.VidraResource, m v1alpha1.ManagedResource) (*held, error) {
	gv, err := schema.ParseGroupVersion(m.APIVersion)
	if err != nil {
		return nil, nil
	}
	mapping, err := dest.Mapper.Mapping(gv.WithKind(m.Kind))
	if meta.IsNoMatchError(err) {
		// The kind is gone (its CRD was deleted), and its objects with it.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", inventoryKey(m), err)
	}
	// The inventory names path segments: one such as ".." would address
	// another object (the metadata client, unlike the dynamic one, does
	// not check them).
	for _, seg := range []string{m.Name, m.Namespace} {
		if msgs := rest.IsValidPathSegmentName(seg); len(msgs) > 0 {
			return nil, fmt.Errorf("inventory entry %s: %q %s", inventoryKey(m), seg, strings.Join(msgs, ", "))
		}
	}
	// Metadata is all a prune reads and writes: the object itself, which a
	// tenant's own server may make as large as Vidra reads, is not needed.
	client := dest.Meta.Resource(mapping.Resource).Namespace(m.Namespace)
	live, err := client.Get(ctx, m.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", inventoryKey(m), err)
	}
	// The marks alone do not make the object this resource's: anyone who
	// may label an object can copy them, and a copy made in the place of an
	// object Vidra applied would otherwise be deleted in its stead.
	if !ownedBy(vr, live) {
		return nil, nil
	}
	return &held{client: client, ref: watchregistry.Ref{Cluster: dest.Cluster, GVR: mapping.Resource}, live: live}, nil
}

// handOverToHeir hands h over to the first other VidraResource that
// declares it and whose identity may manage it, and returns that heir (nil
// when none may) and the claimants refused before it.
func (e *Engine) handOverToHeir(ctx context.Context, logger klog.Logger, dest *destination.Target, vr *v1alpha1.VidraResource, m v1alpha1.ManagedResource, h *held) (*claim, []handoverRefusal, error) {
	key, live := inventoryKey(m), h.live
	claims := e.claimants(dest.Cluster, key, vr.UID, vr.Namespace, m.Namespace)
	heir, refused, truncated, err := firstHeir(claims, func(c claim) (string, string, error) {
		denied, err := mayManage(ctx, c.as.client, c.gvr, m.Namespace, m.Name)
		if err != nil || denied != "" || !escalationChecked(c.gvr) {
			return denied, grantVerbs, err
		}
		patch, err := handoverPatch(live, c.vr)
		if err != nil {
			return "", "", fmt.Errorf("build the hand-over patch: %w", err)
		}
		denied, err = mayWrite(ctx, c.as.client, c.gvr, m.Namespace, m.Name, patch)
		return denied, grantEscalation, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("review whether VidraResource %s/%s may take over %s: %w", heir.vr.Namespace, heir.vr.Name, key, err)
	}
	if truncated {
		logger.Info("Too many VidraResources declare the object to review them all", "claimants", len(claims), "considered", len(refused))
	}
	if heir == nil {
		return nil, refused, nil
	}
	patch, err := handoverPatch(live, heir.vr)
	if err != nil {
		return nil, nil, err
	}
	if err := handOver(ctx, h.client, e.registry.BeginWrite(h.ref, live), key, live, heir.vr, patch); err != nil {
		return nil, nil, err
	}
	logger.Info("Handed object over to another VidraResource that declares it", "to", heir.vr.Namespace+"/"+heir.vr.Name)
	e.events.Event(vr, false, v1alpha1.ReasonHandedOver, "Handed %s over to VidraResource %s/%s, which declares it too", key, heir.vr.Namespace, heir.vr.Name)
	e.enqueue(cache.MetaObjectToName(heir.vr))
	return heir, refused, nil
}

// firstHeir reviews claims in order with review, which says what the
// claimant's identity may not do ("" when it may take the object over) and
// what would let it, and returns the first that may, with the refusals of
// those before it. An identity is reviewed once per resource it declares
// the object as (an Event is one object in two API groups, and a role may
// grant one of them only): its other claimants share that answer. Reviews stop at maxIdentitiesReviewed identities and
// maxClaimantsConsidered claimants, and truncated tells that some were not
// looked at. On an error, heir is the claimant whose review failed.
func firstHeir(claims []claim, review func(claim) (denied, grant string, err error)) (heir *claim, refused []handoverRefusal, truncated bool, err error) {
	type reviewKey struct {
		identity string
		gvr      schema.GroupVersionResource
	}
	reviewed := map[reviewKey]handoverRefusal{}
	for i, c := range claims {
		rk := reviewKey{c.as.serviceAccount, c.gvr}
		r, seen := reviewed[rk]
		if i == maxClaimantsConsidered || !seen && len(reviewed) == maxIdentitiesReviewed {
			return nil, refused, true, nil
		}
		if !seen {
			denied, grant, err := review(c)
			if err != nil {
				return &claims[i], refused, false, err
			}
			if denied == "" {
				return &claims[i], refused, false, nil
			}
			r = handoverRefusal{denied: denied, grant: grant}
			reviewed[rk] = r
		}
		r.to = c
		refused = append(refused, r)
	}
	return nil, refused, false, nil
}

// remove deletes h, an object of a resource's that nobody takes over,
// with propagation; one being deleted already is waited for.
func (e *Engine) remove(ctx context.Context, logger klog.Logger, h *held, key ObjectKey, propagation metav1.DeletionPropagation) (letGoResult, error) {
	client, ref, live := h.client, h.ref, h.live
	if live.GetDeletionTimestamp() != nil {
		// Deleted, and held by a finalizer: its delete event, when the
		// finalizer lets it go, must wake the resource that waits for it,
		// not be filtered as the resource's own delete (the wait would
		// then last until the work queue's next backoff, minutes later).
		if e.registry.AwaitDelete(ref, live) {
			return nothingToLetGo, nil
		}
		return deleted, nil
	}
	logger.V(2).Info("Deleting object")
	e.registry.ExpectDelete(ref, live)
	// The version whose marks were read: an object handed over or marked
	// anew since then is no longer this resource's to delete (a conflict,
	// and the retry reads the marks again).
	uid, rv := live.GetUID(), live.GetResourceVersion()
	err := client.Delete(ctx, live.GetName(), metav1.DeleteOptions{PropagationPolicy: &propagation, Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if err != nil && !apierrors.IsNotFound(err) {
		e.registry.UnexpectDelete(ref, live)
		return nothingToLetGo, fmt.Errorf("delete %s: %w", key, err)
	}
	return deleted, nil
}

// handoverPatch rewrites the marks of live to name the VidraResource to,
// guarded by the resourceVersion read.
func handoverPatch(live metav1.Object, to *v1alpha1.VidraResource) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": live.GetResourceVersion(),
		"labels":          map[string]any{v1alpha1.OwnerUIDLabel: string(to.UID), v1alpha1.BucketLabel: shard.BucketLabel(cache.MetaObjectToName(to))},
		"annotations":     map[string]any{v1alpha1.OwnedByAnnotation: to.Namespace + "/" + to.Name},
	}})
}

// handOver sends patch, the handoverPatch of live to the VidraResource to,
// in one write: the object is never without an owner, never deleted, and
// keeps its UID. The new owner's next apply, under the same field manager,
// owns its fields from then on. w is the patch, declared to the registry;
// the new owner is woken by the caller.
func handOver(ctx context.Context, client metadata.ResourceInterface, w *watchregistry.Write, key ObjectKey, live metav1.Object, to *v1alpha1.VidraResource, patch []byte) error {
	resp, err := client.Patch(ctx, live.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.HandoverFieldManager})
	w.End(resp, err)
	if err != nil {
		return fmt.Errorf("hand %s %s over to VidraResource %s/%s: %w", key.kind, live.GetName(), to.Namespace, to.Name, err)
	}
	return nil
}

// stripMarks removes Vidra's labels and annotation, so that the object is
// left to whoever manages it next and no Vidra watch sees it any more. Its
// field manager is not Vidra's apply manager, so the released object never
// looks like one Vidra applied and keeps. w is the patch, declared to the
// registry: the watch sees it as a delete at its version. The patch is
// guarded by the version of live whose marks were read, as the delete is.
func stripMarks(ctx context.Context, client metadata.ResourceInterface, w *watchregistry.Write, kind string, live metav1.Object) error {
	name := live.GetName()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": live.GetResourceVersion(),
		"labels":          nulls(releasedLabels()),
		"annotations":     nulls(releasedAnnotations()),
	}})
	if err != nil {
		w.Abort()
		return err
	}
	resp, err := client.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.ReleaseFieldManager})
	w.End(resp, err)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release %s %s: %w", kind, name, err)
	}
	return nil
}

// Leave prunes (or, with spec.prune false, releases) pass.Inventory on
// target, the cluster the resource's objects were on before its
// spec.destination moved; old is the resource aimed at that cluster. It
// returns false when it could not settle every object: the failures are in
// pass.Out.Errs and the objects left in pass.Out.Inventory, to be tried
// again. On success the pass's inventory is empty, and what the engine
// remembered of applies there is forgotten.
func (e *Engine) Leave(ctx context.Context, pass *Pass, old *v1alpha1.VidraResource, target *destination.Target) bool {
	leave := &Pass{VR: old, Target: target, Inventory: pass.st.withUnrecorded(pass.Inventory, target.Cluster), key: pass.key, st: pass.st, overrides: pass.overrides}
	kept := e.prune(ctx, leave, nil)
	pass.Out.Pruned = append(pass.Out.Pruned, leave.Out.Pruned...)
	pass.Out.Released = append(pass.Out.Released, leave.Out.Released...)
	pass.Out.Changed += leave.Out.Changed
	if len(leave.Out.Errs) > 0 {
		pass.Out.Errs = append(pass.Out.Errs, leave.Out.Errs...)
		pass.Out.Inventory = kept
		return false
	}
	// Records of applies there say nothing of the new cluster's objects.
	clear(pass.st.applied)
	clear(pass.st.unmanaged)
	pass.st.unrecorded, pass.st.searched = nil, false
	pass.Inventory, pass.Out.Inventory = nil, nil
	return true
}

// Cleanup deletes (del) or releases every object of vr on target, for the
// finalizer: its inventory and, with declared, the objects its manifest
// declares, which a first reconcile interrupted before its status write may
// have applied without recording them. Recorded objects in a namespace
// being deleted are left to that deletion, which waits for them; whether it
// is being deleted is asked as the operator, so not for objects the
// manifest alone names, which the resource's identity may not be able to
// read (see the loop below). It returns what is left (Leftovers): the
// objects it deleted that are not gone yet, and those it failed on, with
// their errors. Once ctx's reconcile runs out of its time it stops, and
// fails the objects it did not get to: together with the pending ones,
// they are all a next try needs to look at.
func (e *Engine) Cleanup(ctx context.Context, vr *v1alpha1.VidraResource, target *destination.Target, del, declared bool) (Leftovers, error) {
	items, unrecorded, unread := e.cleanupItems(ctx, vr, target, declared)
	st := e.stateFor(cache.MetaObjectToName(vr), vr.UID)
	st.cleanupRecheck = 0
	t := e.letGoAll(ctx, vr, target, items, unrecorded, del)
	if len(t.unchecked) > 0 {
		e.events.Event(vr, true, "CleanupSkipped", "Not recorded as applied, and the resource's identity may not read them, so it cannot have created them; left as they are: %s",
			strings.Join(t.unchecked, ", "))
	}
	st.released += t.released
	if len(t.kept) > 0 {
		e.events.Event(vr, false, "Kept", "Kept %s whose annotation %s is disabled, without Vidra's marks: %s",
			wording.Count(len(t.kept), "object"), v1alpha1.PrunePolicyAnnotation, strings.Join(t.kept, ", "))
	}
	if len(t.pending) > 0 {
		e.awaitGone(ctx, vr, target, t.pending)
	}
	return Leftovers{Pending: t.pending, Failed: t.failed, Recheck: st.cleanupRecheck}, errors.Join(append([]error{unread}, t.errs...)...)
}

// Leftovers is what a Cleanup did not finish, for a next try.
type Leftovers struct {
	// Pending are the objects deleted that are not gone yet.
	Pending []v1alpha1.ManagedResource
	// Failed are the objects it failed on.
	Failed []v1alpha1.ManagedResource
	// Recheck, when not zero, is when the next try is due: a CRD among
	// Pending is held by the API server's cleanup, which the next try
	// requeues (requeueCRDCleanup). Without it, the delete events of the
	// pending objects and the work queue's backoff bring the next try.
	Recheck time.Duration
}

// cleanupItems returns the objects Cleanup lets go: vr's inventory, with
// what passes applied that no status write recorded, and, with declared,
// the objects of its manifest that are not in the inventory (unrecorded),
// in case a first reconcile created them and stopped before writing its
// status. unread is why the manifest could not be read: its objects are
// then not looked for; the inventory's are let go all the same, and the
// error returned, as a failed look at the destination is.
func (e *Engine) cleanupItems(ctx context.Context, vr *v1alpha1.VidraResource, target *destination.Target, declared bool) (items []v1alpha1.ManagedResource, unrecorded map[ObjectKey]bool, unread error) {
	items = e.stateFor(cache.MetaObjectToName(vr), vr.UID).withUnrecorded(vr.Status.ManagedResources, target.Cluster)
	unrecorded = map[ObjectKey]bool{}
	if !declared {
		return items, unrecorded, nil
	}
	got := e.manifests.objects(ctx, cache.MetaObjectToName(vr), vr)
	if unread = got.err(); unread != nil || len(got.errs) > 0 || checkDefaultNamespace(vr) != nil {
		return items, unrecorded, unread
	}
	inv := inventorySet(items)
	for _, o := range got.objs {
		u := mark(o.Object, vr)
		if policyOf(u).ignored {
			// Never Vidra's to touch, even when its marks say so.
			continue
		}
		if u.GetNamespace() == "" {
			if ns, err := target.Mapper.Namespaced(u.GroupVersionKind()); err == nil && ns {
				u.SetNamespace(vr.DefaultNamespace())
			}
		}
		if !inv[keyOf(u)] {
			items = append(items, managedResource(u))
			unrecorded[keyOf(u)] = true
		}
	}
	return items, unrecorded, nil
}

// cleanupTally is what Cleanup's objects came to.
type cleanupTally struct {
	pending, failed []v1alpha1.ManagedResource
	errs            []error
	// kept are the objects kept by their prune annotation, unchecked the
	// unrecorded ones the identity may not read; released counts those
	// kept or handed over.
	kept, unchecked []string
	released        int
}

// letGoAll deletes (del) or releases each of items, until ctx's reconcile
// runs out of its time.
func (e *Engine) letGoAll(ctx context.Context, vr *v1alpha1.VidraResource, target *destination.Target, items []v1alpha1.ManagedResource, unrecorded map[ObjectKey]bool, del bool) cleanupTally {
	var t cleanupTally
	terminating := namespacesTerminating(ctx, target)
	for i, m := range items {
		if oot := destination.OutOfTime(ctx); oot != nil {
			// What is left waits for the next try, which goes faster
			// through the objects already gone.
			t.errs = append(t.errs, fmt.Errorf("%w after %d of %d objects", oot, i, len(items)))
			// Only recorded ones: the caller keeps failed as the inventory,
			// and a next try finds the manifest's unrecorded objects again,
			// still unrecorded. Recorded, one its identity may not even
			// read would hold the deletion for ever.
			for _, m := range items[i:] {
				if !unrecorded[inventoryKey(m)] {
					t.failed = append(t.failed, m)
				}
			}
			break
		}
		// Asked as the operator, so only of recorded objects, which the
		// identity applied: a manifest-only object in a namespace the
		// identity may not read would otherwise be skipped or reported
		// as that namespace is or is not being deleted, and tell the
		// tenant which.
		if del && m.Namespace != "" && !unrecorded[inventoryKey(m)] && terminating(m.Namespace) {
			continue
		}
		what, err := e.letGo(ctx, target, vr, m, del, false)
		t.add(m, what, err, unrecorded[inventoryKey(m)])
	}
	return t
}

// add counts how letting m go ended.
func (t *cleanupTally) add(m v1alpha1.ManagedResource, what letGoResult, err error, unrecorded bool) {
	switch {
	case err != nil && unrecorded && apierrors.IsForbidden(err):
		// An identity that may not even read the object cannot have
		// created it: most often its apply was refused. Holding the
		// deletion for it would hold it for ever.
		t.unchecked = append(t.unchecked, inventoryKey(m).String())
	case err != nil:
		t.errs = append(t.errs, err)
		t.failed = append(t.failed, m)
	case what == deleted:
		t.pending = append(t.pending, m)
	case what == keptByAnnotation:
		t.kept = append(t.kept, inventoryKey(m).String())
		t.released++
	case what == handedOver:
		t.released++
	}
}

// namespacesTerminating returns a test of whether a namespace of the
// destination is being deleted, which reads each namespace once. A
// namespace that cannot be read counts as not terminating: its objects are
// deleted and waited for as any.
func namespacesTerminating(ctx context.Context, target *destination.Target) func(string) bool {
	seen := map[string]bool{}
	return func(ns string) bool {
		t, ok := seen[ns]
		if !ok {
			t = target.NamespaceDeleting(ctx, ns)
			seen[ns] = t
		}
		return t
	}
}

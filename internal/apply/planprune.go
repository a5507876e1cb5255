// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"cmp"
	"context"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// leaving decides for each object of the inventory that left the manifest
// (not in desired) and is still the resource's, in inventory order, as
// conclude and prune do: the prunes fails hold back first (decideHolds),
// then letGo's rules.
func (pl *planner) leaving(ctx context.Context, desired map[ObjectKey]bool, fails []*ObjectError) []Decision {
	inventory := pl.in.VR.Status.ManagedResources
	var keys []ObjectKey
	for _, m := range inventory {
		if k := inventoryKey(m); !desired[k] {
			keys = append(keys, k)
		}
	}
	held := decideHolds(keys, fails)
	var out []Decision
	for _, m := range inventory {
		if k := inventoryKey(m); !desired[k] {
			if d, ok := pl.letGo(ctx, m, held[k]); ok {
				out = append(out, d)
			}
		}
	}
	return out
}

// letGo decides for m, an inventory entry that left the manifest. ok is
// false when there is nothing of the resource's to let go: the object is
// gone, or not the resource's (heldObject's rule).
func (pl *planner) letGo(ctx context.Context, m v1alpha1.ManagedResource, hold PruneHold) (d Decision, ok bool) {
	k := inventoryKey(m)
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(m.APIVersion)
	obj.SetKind(m.Kind)
	obj.SetNamespace(m.Namespace)
	obj.SetName(m.Name)
	d = Decision{Key: k, Object: obj, Index: -1}
	gv, err := schema.ParseGroupVersion(m.APIVersion)
	if err != nil {
		return d, false
	}
	live, err := pl.live.Get(ctx, gv.WithKind(m.Kind), m.Namespace, m.Name)
	switch {
	case err != nil:
		return pruneFailed(d, k, err), true
	case live == nil || !ownedBy(pl.in.VR, live):
		return d, false
	case hold != (PruneHold{}):
		d.Live, d.Action, d.Holder = live, PlanHold, hold.By
		d.Reason = "an object of the same kind and name fails, which may be this one moved"
		return d, true
	}
	if live.GetDeletionTimestamp() == nil {
		if d.Heir, err = pl.heir(ctx, k); err != nil {
			return pruneFailed(d, k, err), true
		}
	}
	d.Live = live
	del, refuse := pruneDeletes(pl.in.VR, k)
	d.Action, d.Reason = decideLetGo(k, live, d.Heir != "", del, refuse)
	return d, true
}

// releasedLabels and releasedAnnotations are the marks a release strips
// (stripMarks), which Released shows gone.
func releasedLabels() []string {
	return []string{v1alpha1.ManagedByLabel, v1alpha1.OwnerUIDLabel, v1alpha1.BucketLabel}
}

func releasedAnnotations() []string { return []string{v1alpha1.OwnedByAnnotation} }

// nulls is a merge patch's removal of keys.
func nulls(keys []string) map[string]any {
	m := make(map[string]any, len(keys))
	for _, k := range keys {
		m[k] = nil
	}
	return m
}

// Released returns live as a release leaves it (PlanRelease, PlanKeep):
// without Vidra's marks.
func Released(live *unstructured.Unstructured) *unstructured.Unstructured {
	u := live.DeepCopy()
	labels, annotations := u.GetLabels(), u.GetAnnotations()
	for _, k := range releasedLabels() {
		delete(labels, k)
	}
	for _, k := range releasedAnnotations() {
		delete(annotations, k)
	}
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	return u
}

// pruneFailed is d, the decision on the object of k, failing on err.
func pruneFailed(d Decision, k ObjectKey, err error) Decision {
	d.Action, d.Reason = PlanFail, "could not be looked at"
	d.Err = &ObjectError{Key: k, Index: -1, Reason: v1alpha1.ReasonPruneFailed, Retry: true, Err: err}
	return d
}

// decideLetGo is what letting live, the object of k, go does, in the
// order letGo acts on: a hand-over to a resource that declares it (heir)
// whatever else holds, then the refusal to delete a Namespace or CRD
// (refuse), a release when the object is not to be deleted (del false:
// spec.prune false, or deletionPolicy Orphan), the keep of its prune:
// disabled annotation, and otherwise a deletion. The reasons are a
// prune's, which Plan shows.
func decideLetGo(k ObjectKey, live metav1.Object, heir, del, refuse bool) (Action, string) {
	deleting := live.GetDeletionTimestamp() != nil
	switch {
	case heir && !deleting:
		return PlanHandOver, "another VidraResource declares it"
	case refuse:
		return PlanPruneRefused, "deleting a " + k.kind + " deletes everything in it, and spec.pruneNamespacesAndCRDs is not true"
	case !del:
		return PlanRelease, "spec.prune is false"
	case pruneDisabled(live) && !deleting:
		return PlanKeep, v1alpha1.PrunePolicyAnnotation + ": disabled"
	}
	return PlanPrune, "left the manifest"
}

// heir names, namespace/name, the VidraResource the object of k would be
// handed over to: as claimants orders them, the first other live, not
// suspended resource of this cluster that declares it and has reconciled
// its spec (a claim is recorded by its reconcile); "" when none does.
// Whether its identity may manage the object is the operator's review
// alone (mayManage): Plan cannot ask it.
func (pl *planner) heir(ctx context.Context, k ObjectKey) (string, error) {
	if err := pl.list(ctx); err != nil {
		return "", err
	}
	vr := pl.in.VR
	var cands []*v1alpha1.VidraResource
	for _, c := range pl.resources {
		if c.UID != vr.UID && c.DeletionTimestamp == nil && !c.Spec.Suspend && c.Generation == c.Status.ObservedGeneration &&
			isLocal(c) == isLocal(vr) && pl.declares(c, k) {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return "", nil
	}
	prefer := []string{vr.Namespace, k.namespace}
	rank := func(c *v1alpha1.VidraResource) int {
		if i := slices.Index(prefer, c.Namespace); i >= 0 {
			return i
		}
		return len(prefer)
	}
	c := slices.MinFunc(cands, func(a, b *v1alpha1.VidraResource) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name))
	})
	return c.Namespace + "/" + c.Name, nil
}

// declares reports whether the manifest of c, spec.manifest as written
// (one read from spec.manifestFrom, or encoded, is not looked at), holds
// the object of k, applied.
func (pl *planner) declares(c *v1alpha1.VidraResource, k ObjectKey) bool {
	if pl.declared == nil {
		pl.declared = map[types.UID]map[ObjectKey]bool{}
	}
	keys, ok := pl.declared[c.UID]
	if !ok {
		keys = map[ObjectKey]bool{}
		if c.Spec.ManifestEncoding == "" && len(c.Spec.ManifestFrom) == 0 {
			objs, errs := manifest.Parse(c.Spec.Manifest)
			resolved, rerrs := manifest.Resolve(objs, c.DefaultNamespace(), pl.in.Namespaced)
			for _, o := range resolved {
				if len(errs) == 0 && len(rerrs) == 0 && !policyOf(o.Object).ignored {
					keys[keyOf(o.Object)] = true
				}
			}
		}
		pl.declared[c.UID] = keys
	}
	return keys[k]
}

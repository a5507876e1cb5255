// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// cacheSyncWait bounds how long reads wait for an informer's first list,
// counted from the informer's start, before they ask the API server
// instead.
const cacheSyncWait = 10 * time.Second

// readLive returns the live object: from the watch registry's cache when it
// holds it, else from the API server. absent is true when no object of that
// name exists that Vidra could read: either the API server said so, or a
// synced cache says no object with Vidra's label exists by that name, and
// the API server was not asked: only an unmanaged object could exist then,
// and the create-only apply of applyAbsent detects it without changing it.
//
// A cache of the local cluster that is still listing (at startup, or after
// a rebalance changed the objects a replica caches) is waited for, up to
// cacheSyncWait after its informer started: one list then serves every
// resource, where a read per object would compete with it for the API
// server. A remote cluster's is not: one that cannot be reached would hold
// a worker at every reconcile, and other tenants' resources with it.
//
// A resource that acts as a ServiceAccount learns nothing from the
// operator's cache that its identity could not read. An object the cache
// holds for another resource is read as the ServiceAccount, and if that is
// refused, it is answered as if absent: the create-only apply then goes
// as the ServiceAccount, as for a name that holds nothing. Else a
// ServiceAccount refused both in team-b would read "cannot get" for the one
// and "cannot patch" for the other, and learn which names, in namespaces it
// may not read, hold objects Vidra manages. One that may read the object
// sees its owner, as it would with kubectl.
func (e *Engine) readLive(ctx context.Context, pass *Pass, p *planned) (live *unstructured.Unstructured, absent bool, err error) {
	u, err := e.readCache(ctx, pass, p)
	switch {
	case err == nil && (pass.Target.ServiceAccount == "" || u.GetLabels()[v1alpha1.OwnerUIDLabel] == string(pass.VR.UID)):
		return u, false, nil
	case apierrors.IsNotFound(err) && !errors.Is(err, watchregistry.ErrStub):
		return nil, true, nil
	}
	// A stub is an object the cache holds no more of than its marks (see
	// internal/cachecharge): it exists, and is read.
	cached := err == nil || errors.Is(err, watchregistry.ErrStub)
	live, absent, err = e.getLive(ctx, pass, p)
	if cached && apierrors.IsForbidden(err) {
		return nil, true, nil
	}
	return live, absent, err
}

// readCache reads p's object from the watch registry's cache, waiting for a
// local informer still listing as readLive says.
func (e *Engine) readCache(ctx context.Context, pass *Pass, p *planned) (*unstructured.Unstructured, error) {
	ref := watchregistry.Ref{Cluster: pass.Target.Cluster, GVR: p.gvr}
	u, err := e.registry.Get(ref, p.obj.GetNamespace(), p.obj.GetName())
	if errors.Is(err, watchregistry.ErrNotSynced) && e.waitListed(ctx, ref) {
		u, err = e.registry.Get(ref, p.obj.GetNamespace(), p.obj.GetName())
	}
	return u, err
}

// waitListed waits for ref's informer to list when readLive would, and
// reports whether it has: also when it finished listing since the read
// that found it still listing. One look at the informer decides both
// whether it has listed and how long is left to wait: with two, an
// informer that finished listing between them was neither.
func (e *Engine) waitListed(ctx context.Context, ref watchregistry.Ref) bool {
	if ref.Cluster != destination.LocalCluster {
		return false
	}
	snap, ok := e.registry.Snapshot(ref)
	if ok && snap.State == watchregistry.StateSynced {
		return true
	}
	left := e.listWaitLeft(snap, ok)
	if left <= 0 {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	return e.registry.WaitForSync(wctx, ref) == nil
}

// listWaitLeft is how long a read may still wait for the informer snap
// describes to list: what is left of cacheSyncWait since it started, so
// that an informer whose list keeps failing (a kind whose conversion
// webhook is down) delays reconciles for cacheSyncWait once, not at every
// reconcile, and never holds workers other tenants' resources wait for.
// Zero when the informer is not listing, or has not started (the registry
// not running: informers start with it, and stop as Stopped).
func (e *Engine) listWaitLeft(snap watchregistry.RefSnapshot, tracked bool) time.Duration {
	if !tracked || snap.State != watchregistry.StatePending || snap.StartedAt.IsZero() {
		return 0
	}
	return min(cacheSyncWait, cacheSyncWait-e.clock.Since(snap.StartedAt))
}

func (e *Engine) getLive(ctx context.Context, pass *Pass, p *planned) (*unstructured.Unstructured, bool, error) {
	live, err := pass.Target.Client.Resource(p.gvr).Namespace(p.obj.GetNamespace()).Get(ctx, p.obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return live, false, nil
}

// checkOwner refuses to take over an object that another VidraResource
// owns, or that exists without Vidra's marks. An object whose marks name an
// owner that is authoritatively gone is adopted when the resource opts in
// (spec.adoptOrphans), and only then: see ownerState.
func (e *Engine) checkOwner(ctx context.Context, pass *Pass, live *unstructured.Unstructured, p *planned) *ObjectError {
	v := judgeOwner(pass.VR, live, p, pass.Target.Cluster == destination.LocalCluster, func(owner string, uid types.UID) (ownerState, error) {
		return e.ownerState(ctx, owner, uid, pass.VR.Spec.AdoptOrphans)
	})
	switch {
	case v.claim:
		if pass.claims == nil {
			pass.claims = map[ObjectKey]schema.GroupVersionResource{}
		}
		pass.claims[p.key] = p.gvr
	case v.adopt:
		return e.adopt(ctx, pass, p, live, v.owner, v.uidShown)
	case v.err != nil && v.err.Reason == v1alpha1.ReasonUnmanagedExists:
		pass.st.unmanaged[p.key] = true
	}
	return v.err
}

// ownerVerdict is what the marks of a live object say of writing it.
type ownerVerdict struct {
	// err refuses the write; nil when the object is the resource's.
	err *ObjectError
	// claim: another live VidraResource owns it (err says so); the
	// resource declares it too, and is handed it when that owner lets it
	// go.
	claim bool
	// adopt: its owner is gone and the resource adopts orphans: it is
	// adopted once a fresh read confirms the marks (see adopt), which
	// name owner, shown by its UID uidShown.
	adopt           bool
	owner, uidShown string
}

// judgeOwner decides whether vr may write live, the object of p. lookup
// says whether the VidraResource the marks name exists; it is asked only
// when the marks name another resource. local: the object is on the
// cluster Vidra runs in. Apply and Plan judge owners here.
func judgeOwner(vr *v1alpha1.VidraResource, live *unstructured.Unstructured, p *planned, local bool, lookup func(string, types.UID) (ownerState, error)) ownerVerdict {
	uid := live.GetLabels()[v1alpha1.OwnerUIDLabel]
	// A resource has a UID once created; a preview of one not created yet
	// has none, and no object is its.
	if uid != "" && uid == string(vr.UID) {
		// The resource's UID is no secret (its objects carry it): marks
		// copied onto an object someone else made, say a backup restored
		// or an edited copy created in the place of Vidra's, do not make
		// it this resource's to write, record and later delete.
		if AppliedByVidra(live.GetManagedFields()) {
			return ownerVerdict{}
		}
		return ownerVerdict{err: unmanagedErr(p, "carries this resource's marks but was never applied by Vidra (created from a copy of Vidra's object?)")}
	}
	if uid == "" {
		return ownerVerdict{err: unmanagedErr(p, "exists and is not managed by Vidra")}
	}
	state, err := lookup(live.GetAnnotations()[v1alpha1.OwnedByAnnotation], types.UID(uid))
	// A remote destination's server writes whatever labels it likes.
	owner, uidShown := ownerName(live), wording.Cut(readable(uid), 63, "…")
	switch {
	case err != nil:
		return ownerVerdict{err: &ObjectError{Key: p.key, Index: p.index, Reason: v1alpha1.ReasonOwnedByOther, Conflict: true, Retry: true,
			Err: fmt.Errorf("carries the marks of VidraResource %s, which could not be looked up (retrying): %w", owner, err)}}
	case state == ownerLive:
		return ownerVerdict{claim: true, err: &ObjectError{Key: p.key, Index: p.index, Reason: v1alpha1.ReasonOwnedByOther, Conflict: true,
			Err: fmt.Errorf("is managed by VidraResource %s (an object has one owner): remove it from this manifest, or from %s's (it is then handed over to this resource)", owner, owner)}}
	case !local:
		// VidraResources live in the cluster of the installation that
		// reconciles them; an owner this cluster does not hold may belong
		// to another Vidra installation sharing the remote cluster.
		return ownerVerdict{err: &ObjectError{Key: p.key, Index: p.index, Reason: v1alpha1.ReasonOwnedByOther, Conflict: true,
			Err: fmt.Errorf("carries the marks of VidraResource %s (UID %s), which this installation does not have: it may belong to another Vidra installation that shares the cluster (if it does not, delete the object and this resource creates it)", owner, uidShown)}}
	case state == ownerUnknown:
		// This replica sees only some VidraResources (--watch-namespace,
		// --shard-selector): one it does not see may own the object under
		// a name the annotation no longer tells.
		return ownerVerdict{err: unmanagedErr(p, fmt.Sprintf("carries the marks of VidraResource %s (UID %s), which this operator cannot find among the VidraResources it sees (it watches one namespace or a shard only), so it does not take the object over", owner, uidShown))}
	}
	return judgeOrphan(vr, live, p, owner, uidShown)
}

// judgeOrphan decides for live, whose marks name a VidraResource that is
// gone (owner, shown by its UID uidShown), whether vr adopts it.
func judgeOrphan(vr *v1alpha1.VidraResource, live *unstructured.Unstructured, p *planned, owner, uidShown string) ownerVerdict {
	// The marks cannot be trusted on their own: anyone who may label an
	// object can write them. Only an object Vidra has applied is adopted
	// (the cache keeps the name of Vidra's apply entry).
	if !AppliedByVidra(live.GetManagedFields()) {
		what := "carries Vidra's marks but was never applied by Vidra"
		if vr.Spec.AdoptOrphans {
			what += " (spec.adoptOrphans takes over only objects Vidra's apply wrote)"
		}
		return ownerVerdict{err: unmanagedErr(p, what)}
	}
	if p.policy.createOnly {
		// apply: IfNotPresent never writes an object that exists, its
		// marks included: adopted, it would stay marked as the gone
		// resource's, and be this one's only until adoptOrphans is unset.
		return ownerVerdict{err: unmanagedErr(p, fmt.Sprintf("carries the marks of a VidraResource that no longer exists (%s, UID %s), and its annotation %s: IfNotPresent keeps Vidra from writing it, so it cannot be adopted", owner, uidShown, v1alpha1.ApplyPolicyAnnotation))}
	}
	if !vr.Spec.AdoptOrphans {
		// Whoever may create the object may also have written the marks
		// of a resource that never existed and a vidra Apply entry: only
		// the resource's author can say it expects leftovers here. Decided
		// on the cached object: a resource that does not adopt costs no
		// read per leftover it declares, at every retry.
		return ownerVerdict{err: unmanagedErr(p, fmt.Sprintf("carries the marks of a VidraResource that no longer exists (%s, UID %s), and this resource does not adopt orphans (spec.adoptOrphans takes it over)", owner, uidShown))}
	}
	return ownerVerdict{adopt: true, owner: owner, uidShown: uidShown}
}

// adopt takes over live, an object Vidra applied whose marks name a gone
// owner (owner, shown by its UID uidShown), for a resource that adopts
// orphans, once a fresh read confirms the marks.
func (e *Engine) adopt(ctx context.Context, pass *Pass, p *planned, live *unstructured.Unstructured, owner, uidShown string) *ObjectError {
	// An adoption reads the object afresh: the cache may lag behind a
	// change of its marks.
	full, _, err := e.getLive(ctx, pass, p)
	if err != nil {
		return classify(p, fmt.Errorf("read: %w", err))
	}
	if oe := confirmAdoption(p, live, full); oe != nil {
		if oe.Reason == v1alpha1.ReasonUnmanagedExists {
			pass.st.unmanaged[p.key] = true
		}
		return oe
	}
	// The owner named on the object is gone (deleted without its finalizer
	// running): the marks are stale and the object is free to adopt. The
	// Event, once the apply has written it, tells the resource's readers
	// what it took.
	p.adoptedFrom = fmt.Sprintf("VidraResource %s (UID %s)", owner, uidShown)
	p.adoptVersion = full.GetResourceVersion()
	klog.FromContext(ctx).Info("Adopting an object whose owner is gone", "object", p.key.String(), "previousOwner", owner, "previousOwnerUID", uidShown)
	return nil
}

// confirmAdoption checks full, p's object read afresh, against live, the
// copy whose marks judgeOwner found to name a gone owner: nil when it may
// be adopted.
func confirmAdoption(p *planned, live, full *unstructured.Unstructured) *ObjectError {
	uid := live.GetLabels()[v1alpha1.OwnerUIDLabel]
	if full == nil || full.GetLabels()[v1alpha1.OwnerUIDLabel] != uid || full.GetAnnotations()[v1alpha1.OwnedByAnnotation] != live.GetAnnotations()[v1alpha1.OwnedByAnnotation] {
		// Deleted, or marked anew since the cache's copy (another
		// resource adopted it first, or it was handed over): the next
		// pass reads it again.
		return &ObjectError{Key: p.key, Index: p.index, Reason: v1alpha1.ReasonOwnedByOther, Conflict: true, Retry: true,
			Err: errors.New("changed owner while Vidra read it (retrying)")}
	}
	if !AppliedByVidra(full.GetManagedFields()) {
		return unmanagedErr(p, "carries Vidra's marks but was never applied by Vidra (spec.adoptOrphans takes over only objects Vidra's apply wrote)")
	}
	return nil
}

// ownerState is what the cluster Vidra runs in says of the VidraResource
// whose marks an object carries.
type ownerState int

const (
	// ownerLive: a VidraResource of that UID exists.
	ownerLive ownerState = iota
	// ownerGone: none does, authoritatively.
	ownerGone
	// ownerUnknown: none that this operator sees, and it does not see
	// them all.
	ownerUnknown
)

// ownerState looks up the VidraResource of uid, which the owned-by
// annotation names owner (namespace/name). The UID decides, not the name:
// the annotation is anyone's to rewrite who may patch the object, and one
// naming a resource that does not exist would otherwise make a live
// owner's object look left behind, free for another resource to adopt.
// The name still helps where the informer cache lags behind a creation,
// which the API server, asked by name, does not: with confirm, a resource
// the cache does not hold is asked for. Only an adoption needs that: for
// any other resource, a cache a few milliseconds late costs a message that
// is wrong until its next reconcile, where a request per object its
// manifest declares would cost the API server at every retry.
func (e *Engine) ownerState(ctx context.Context, owner string, uid types.UID, confirm bool) (ownerState, error) {
	exists, known := false, false
	if e.resources != nil {
		exists, known = e.resources(uid)
	}
	if exists {
		return ownerLive, nil
	}
	if key, ok := ownerKey(owner); ok {
		if vr, err := e.owners.VidraResources(key.Namespace).Get(key.Name); err == nil && vr.UID == uid {
			return ownerLive, nil
		}
		if confirm {
			vr, err := e.vidra.InfrahubV1alpha1().VidraResources(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
			switch {
			case err == nil && vr.UID == uid:
				return ownerLive, nil
			case err != nil && !apierrors.IsNotFound(err):
				return ownerUnknown, fmt.Errorf("get VidraResource %s: %w", key, err)
			}
		}
	}
	if !known {
		return ownerUnknown, nil
	}
	return ownerGone, nil
}

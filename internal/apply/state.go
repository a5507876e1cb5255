// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// Contention: an object edited back this many times within the window has
// another writer fighting Vidra over it.
const (
	contentionEdits  = 3
	contentionWindow = 2 * time.Minute
)

// resourceState is what the engine remembers of one VidraResource
// between reconciles. Only the worker holding the key touches it: the queue
// never hands one key to two workers at once.
type resourceState struct {
	uid types.UID
	// applied remembers, per object, the resourceVersion Vidra's last apply
	// produced and the hash of what it applied: while both match, the object
	// is in sync without comparing it field by field.
	applied map[ObjectKey]appliedRecord
	// unmanaged remembers objects found to exist without Vidra's marks,
	// which the label-scoped caches cannot show.
	unmanaged map[ObjectKey]bool
	// edits remembers recent corrections of edited objects, to tell a
	// one-off hand edit from another writer that keeps changing a field
	// Vidra owns.
	edits map[ObjectKey]*editHistory
	// claims are the objects of this resource's manifest that another live
	// VidraResource owns, on the cluster named by claimsCluster: when that
	// owner lets one go, it hands it over here instead of deleting it.
	// Unlike the rest, they are read by other keys' workers, under the
	// engine's mu.
	claims        map[ObjectKey]schema.GroupVersionResource
	claimsCluster string
	// claimsGeneration is the resource's generation when its claims were
	// recorded: once its spec changed, its manifest may no longer declare
	// them, and a reconcile that stops early (a dependency not Ready)
	// would not record them again.
	claimsGeneration int64
	// claimsAs is the identity the claims were made with on claimsCluster:
	// an object is handed over only when it may manage it (mayManage).
	claimsAs claimIdentity
	// cleanupRecheck is when the deletion's next try is due, set by a
	// Cleanup that waits for a CRD held by the API server's cleanup.
	cleanupRecheck time.Duration
	// history are the last drift corrections, newest first, and reported
	// the drift listed under driftPolicy Report; both start from the
	// resource's status (load).
	history  []v1alpha1.DriftRecord
	reported map[ObjectKey]v1alpha1.DriftRecord
	loaded   bool
	// released counts the objects the cleanup of a deleted resource let go
	// without deleting them (kept by their annotation, or handed over), over
	// all its passes: each pass sees only the objects still marked as this
	// resource's, so no single one knows how many were deleted.
	released int
	// unrecorded are inventory entries of passes on unrecordedCluster that
	// no status write has recorded yet (see unrecorded.go), and searched
	// whether the caches were searched for objects of this resource that
	// no inventory names.
	unrecorded        []v1alpha1.ManagedResource
	unrecordedCluster string
	searched          bool
}

type editHistory struct {
	times  []time.Time
	writer string
	fields []string
}

// corrected records that Vidra restored an object someone edited.
func (st *resourceState) corrected(key ObjectKey, writer string, fields []string, now time.Time) {
	if st.edits == nil {
		st.edits = map[ObjectKey]*editHistory{}
	}
	h := st.edits[key]
	if h == nil {
		h = &editHistory{}
		st.edits[key] = h
	}
	h.times = append(h.times, now)
	h.writer = writer
	h.fields = fields
}

// contended lists, sorted, the objects another writer keeps changing, and
// forgets corrections that left the window.
func (st *resourceState) contended(now time.Time) []string {
	var out []string
	for key, h := range st.edits {
		h.times = slices.DeleteFunc(h.times, func(t time.Time) bool { return now.Sub(t) > contentionWindow })
		if len(h.times) == 0 {
			delete(st.edits, key)
			continue
		}
		if len(h.times) >= contentionEdits {
			what := ""
			if len(h.fields) > 0 {
				what = " (" + strings.Join(h.fields, ", ") + ")"
			}
			out = append(out, fmt.Sprintf("%s%s was changed by %s %d times in %s; Vidra restores it each time (hand the fields to that writer with spec.ignore, remove them from the manifest, or stop the other writer)",
				key, what, h.writer, len(h.times), contentionWindow))
		}
	}
	slices.Sort(out)
	return out
}

type appliedRecord struct {
	hash uint64
	rv   string
}

func (e *Engine) stateFor(key cache.ObjectName, uid types.UID) *resourceState {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.states[key]
	if st == nil || st.uid != uid {
		st = &resourceState{uid: uid, applied: map[ObjectKey]appliedRecord{}, unmanaged: map[ObjectKey]bool{}}
		e.states[key] = st
	}
	return st
}

// WatchedObject names an object as its watch event does: by the resource
// its informer watches, its namespace and its name.
type WatchedObject struct {
	GVR             schema.GroupVersionResource
	Namespace, Name string
}

// setClaims records the objects of r's manifest that another resource owns,
// replacing those of the previous reconcile: a resource that no longer
// declares an object, or owns it now, has no claim on it.
func (e *Engine) setClaims(r *Pass) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r.st.claims = r.claims
	r.st.claimsGeneration = r.VR.Generation
	if r.Target != nil {
		r.st.claimsCluster = r.Target.Cluster
		r.st.claimsAs = claimIdentity{client: r.Target.Client, serviceAccount: r.Target.ServiceAccount,
			spec: identitySpec{serviceAccountName: r.VR.Spec.ServiceAccountName, destination: *r.VR.Spec.Destination.DeepCopy()}}
	}
}

// claimIdentity is who a claimant acts as on the cluster of its claims.
type claimIdentity struct {
	// client acts with the claimant's identity: its ServiceAccount, or the
	// operator's own.
	client dynamic.Interface
	// serviceAccount names it, namespace/name, or "" for the operator.
	serviceAccount string
	// spec is what decided that identity when the claims were recorded.
	spec identitySpec
}

// identitySpec is the part of a VidraResource's spec its identity on a
// cluster follows from.
type identitySpec struct {
	serviceAccountName string
	destination        v1alpha1.Destination
}

func (s identitySpec) of(vr *v1alpha1.VidraResource) bool {
	return s.serviceAccountName == vr.Spec.ServiceAccountName && equality.Semantic.DeepEqual(s.destination, vr.Spec.Destination)
}

// claim is a live VidraResource that declares an object another owns,
// with the identity it would manage it with.
type claim struct {
	vr *v1alpha1.VidraResource
	as claimIdentity
	// gvr is the resource the claimant declares the object as, which its
	// rights are checked on: an Event is one object in two API groups,
	// and a role may grant one of them only.
	gvr schema.GroupVersionResource
}

// claimants returns the live VidraResources, other than the one of uid,
// that declare the object of key on cluster and found it owned by another,
// in a stable order so that of several the same one wins on every try: the
// resources of the namespaces of prefer first, in that order, then the
// others, each by name. A claim recorded before its resource's spec
// changed is left out: the manifest may no longer declare the object, or
// the identity it was made with may no longer be the resource's; its next
// reconcile that gets as far as applying records it again.
func (e *Engine) claimants(cluster string, key ObjectKey, uid types.UID, prefer ...string) []claim {
	type candidate struct {
		uid        types.UID
		generation int64
		as         claimIdentity
		gvr        schema.GroupVersionResource
	}
	e.mu.Lock()
	candidates := map[cache.ObjectName]candidate{}
	for k, st := range e.states {
		if gvr, ok := st.claims[key]; ok && st.uid != uid && st.claimsCluster == cluster {
			candidates[k] = candidate{uid: st.uid, generation: st.claimsGeneration, as: st.claimsAs, gvr: gvr}
		}
	}
	e.mu.Unlock()
	var out []claim
	rank := func(k cache.ObjectName) int {
		if i := slices.Index(prefer, k.Namespace); i >= 0 {
			return i
		}
		return len(prefer)
	}
	for _, k := range slices.SortedFunc(maps.Keys(candidates), func(a, b cache.ObjectName) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a.String(), b.String()))
	}) {
		c := candidates[k]
		vr, err := e.owners.VidraResources(k.Namespace).Get(k.Name)
		if err == nil && vr.UID == c.uid && vr.Generation == c.generation && vr.DeletionTimestamp == nil && !vr.Spec.Suspend && c.as.client != nil && c.as.spec.of(vr) {
			out = append(out, claim{vr: vr, as: c.as, gvr: c.gvr})
		}
	}
	return out
}

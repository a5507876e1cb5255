// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// Plan tells what an apply of a VidraResource would do, object by object,
// without writing anything: the preview of kubectl vidra diff. It takes
// each object through the steps Apply does (newPlanned, judgeOwner,
// decide) and each object that left the inventory through the prune's
// rules (decideHolds, deleteRefused, pruneDisabled), so that what it says
// is what the operator does. Where Apply would write, Plan stops and
// returns the decision.

// Action is what Plan decided for one object. The actions of a manifest
// object are decide's (InSync, Create, CreateOnly, ReportDrift, Apply,
// MarksOnly, TakeBack, TakeOver, RemoveKeys, Recreate, Conflict, Refuse);
// the rest are Plan's own.
type Action string

// decide's actions, as Plan names them: each actionKind but the reads,
// which Plan performs and decides again.
const (
	PlanInSync      Action = "InSync"
	PlanCreate      Action = "Create"
	PlanCreateOnly  Action = "CreateOnly"
	PlanReportDrift Action = "ReportDrift"
	PlanApply       Action = "Apply"
	PlanMarksOnly   Action = "MarksOnly"
	PlanTakeBack    Action = "TakeBack"
	PlanTakeOver    Action = "TakeOver"
	PlanRemoveKeys  Action = "RemoveKeys"
	PlanRecreate    Action = "Recreate"
	PlanConflict    Action = "Conflict"
	PlanRefuse      Action = "Refuse"
)

// planActions names each of decide's final actions; a kind missing here
// would reach the preview as an empty action (TestEveryDecisionHasAPlanAction).
var planActions = [...]Action{
	actInSync: PlanInSync, actCreate: PlanCreate, actCreateOnly: PlanCreateOnly,
	actReportDrift: PlanReportDrift, actApply: PlanApply, actMarksOnly: PlanMarksOnly,
	actTakeBack: PlanTakeBack, actTakeOver: PlanTakeOver, actRemoveKeys: PlanRemoveKeys,
	actRecreate: PlanRecreate, actConflict: PlanConflict, actRefuse: PlanRefuse,
}

// The actions Plan adds to decide's.
const (
	// PlanIgnore: the object's apply policy is Ignore: never applied.
	PlanIgnore Action = "Ignore"
	// PlanFail: the object could not be looked at (a read failed, or the
	// API server refused the dry run); Err says why.
	PlanFail Action = "Fail"
	// PlanPrune: left the manifest, and is deleted.
	PlanPrune Action = "Prune"
	// PlanRelease: left the manifest, and spec.prune is false: it stays,
	// without Vidra's marks.
	PlanRelease Action = "Release"
	// PlanKeep: left the manifest, and its prune: disabled annotation
	// keeps it, without Vidra's marks.
	PlanKeep Action = "Keep"
	// PlanPruneRefused: a Namespace or CRD that left the manifest, which
	// the resource may not delete (spec.pruneNamespacesAndCRDs): it stays
	// as it is, in the inventory.
	PlanPruneRefused Action = "PruneRefused"
	// PlanHold: left the manifest, but a failing object of the manifest
	// may be it moved: it stays as it is until that object applies.
	PlanHold Action = "Hold"
	// PlanHandOver: left the manifest, and another VidraResource that
	// declares it takes it over, marks rewritten.
	PlanHandOver Action = "HandOver"
)

// Decision is what Plan decided for one object.
type Decision struct {
	// Key identifies the object as the inventory does.
	Key ObjectKey
	// Object is the object the apply would send (marked, with the fields
	// spec.ignore names taken from Live), or for an object that left the
	// manifest its inventory entry (apiVersion, kind, namespace, name).
	Object *unstructured.Unstructured
	// Live is the object as read; nil when there is none.
	Live   *unstructured.Unstructured
	Action Action
	// Reason says why, in a few words.
	Reason string
	// Err is the failure of Conflict, Refuse and Fail.
	Err *ObjectError
	// Adopts names the gone VidraResource whose object the apply adopts
	// (spec.adoptOrphans); Heir the VidraResource a hand-over gives the
	// object to; Holder, for PlanHold, the failing object that holds it.
	Adopts, Heir, Holder string
	// Index is the object's document in the manifest, -1 for an object
	// that left it.
	Index int
}

// LiveReader is what Plan reads of the destination. In the operator it
// would be the watch registry's caches; in kubectl vidra diff it is GETs
// and a server-side dry run.
type LiveReader interface {
	// Get returns the object of kind gvk named namespace/name, whole, as
	// the destination holds it; nil when there is none, or when its kind
	// is not served yet (a CRD of the manifest defines it).
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	// Resources lists the VidraResources of the cluster Vidra runs in,
	// which tell whose an object's marks name, and who takes over an
	// object that leaves the manifest. complete is false when the list
	// may miss some (the reader may not see them all).
	Resources(ctx context.Context) (list []*v1alpha1.VidraResource, complete bool, err error)
	// Changes reports whether applying desired over live changes live.
	// It stands in for the engine's record of its last apply, which only
	// the operator has: asked only where the manifest may have changed
	// since.
	Changes(ctx context.Context, desired, live *unstructured.Unstructured) (bool, error)
}

// PlanInput is what Plan decides on.
type PlanInput struct {
	// VR is the resource, with the manifest to preview in its spec, and
	// its status as it is (inventory, observedGeneration). A spec changed
	// from the stored one has a generation above its observedGeneration,
	// as the API server would give it.
	VR *v1alpha1.VidraResource
	// Objects are the parsed manifest.
	Objects []manifest.Object
	// Namespaced tells a kind's scope, to resolve the manifest.
	Namespaced manifest.ScopeFunc
	// Overrides are the field managers whose edits are taken back
	// (config overrideManagers).
	Overrides []string
	Now       time.Time
}

// Plan returns a decision per object of in's manifest, in manifest order,
// then one per object of the inventory that left it and still exists, in
// inventory order. It returns an error when nothing would be applied: the
// manifest does not resolve (a manifest.ErrorList) or the spec is invalid.
func Plan(ctx context.Context, in PlanInput, live LiveReader) ([]Decision, error) {
	vr := in.VR
	rules, errs := checkSpec(vr)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	resolved, rerrs := manifest.Resolve(in.Objects, vr.DefaultNamespace(), in.Namespaced)
	if len(rerrs) > 0 {
		return nil, rerrs
	}
	if err := checkInventoryNames(resolved); err != nil {
		return nil, err
	}
	pl := &planner{in: in, live: live}
	previous := inventorySet(vr.Status.ManagedResources)
	desired := map[ObjectKey]bool{}
	var out []Decision
	var fails []*ObjectError
	for _, o := range resolved {
		p := newPlanned(vr, o, rules, previous)
		desired[p.key] = true
		d := pl.object(ctx, p)
		if d.Err != nil {
			fails = append(fails, d.Err)
		}
		out = append(out, d)
	}
	return append(out, pl.leaving(ctx, desired, fails)...), nil
}

// planner is one Plan: its input, its reader, and the VidraResources it
// read, once.
type planner struct {
	in        PlanInput
	live      LiveReader
	resources []*v1alpha1.VidraResource
	complete  bool
	listed    bool
	listErr   error
	// declared are the keys each other resource's manifest declares.
	declared map[types.UID]map[ObjectKey]bool
}

// object decides for p, an object of the manifest, as syncObject does,
// with the reader's answers where syncObject would read.
func (pl *planner) object(ctx context.Context, p *planned) Decision {
	d := Decision{Key: p.key, Object: p.obj, Index: p.index}
	if p.policy.ignored {
		d.Action, d.Reason = PlanIgnore, "not applied: "+v1alpha1.ApplyPolicyAnnotation+": Ignore"
		return d
	}
	in := newEvidence(p, pl.in.VR, appliedRecord{}, false, pl.in.Now)
	if err := pl.read(ctx, p, in, &d); err != nil {
		return failed(d, p, err)
	}
	for {
		a := decide(p, in)
		switch {
		case a.kind == actRead:
			in.fresh, in.unmanaged = true, false
			if err := pl.read(ctx, p, in, &d); err != nil {
				return failed(d, p, err)
			}
			continue
		case a.kind == actReadWhole:
			whole, err := pl.get(ctx, p)
			if err != nil {
				return failed(d, p, err)
			}
			in.whole, in.wholeRead = whole, true
			continue
		case a.kind == actInSync && !in.known && !in.unchanged:
			// The manifest may have changed since the last apply: a
			// field it dropped is still in live, which contains the new
			// object all the same. Only the apply would tell.
			changed, err := pl.live.Changes(ctx, p.sent(in.live), in.live)
			if err != nil {
				return failed(d, p, err)
			}
			in.known = true
			if changed {
				in.rec.hash = in.hash + 1
			} else {
				in.rec = appliedRecord{hash: in.hash, rv: in.live.GetResourceVersion()}
			}
			continue
		}
		d.Object, d.Live, d.Action, d.Reason, d.Err = p.sent(in.live), in.live, planActions[a.kind], a.reason, a.err
		return d
	}
}

// failed is d failing on err.
func failed(d Decision, p *planned, err error) Decision {
	d.Action, d.Reason = PlanFail, "could not be looked at"
	d.Err = &ObjectError{Key: p.key, Index: p.index, Reason: v1alpha1.ReasonApplyFailed, Retry: true, Err: err}
	return d
}

func (pl *planner) get(ctx context.Context, p *planned) (*unstructured.Unstructured, error) {
	return pl.live.Get(ctx, p.obj.GroupVersionKind(), p.obj.GetNamespace(), p.obj.GetName())
}

// read reads p's object into in, with the owner check's verdict (as see
// does) and, for an adoption, its confirmation into d.
func (pl *planner) read(ctx context.Context, p *planned, in *evidence, d *Decision) error {
	live, err := pl.get(ctx, p)
	if err != nil || live == nil {
		in.live = nil
		return err
	}
	in.live, in.owner, d.Adopts = live, nil, ""
	v := judgeOwner(pl.in.VR, live, p, isLocal(pl.in.VR), func(_ string, uid types.UID) (ownerState, error) {
		return pl.ownerState(ctx, uid)
	})
	if v.adopt {
		// As adopt does: the marks are confirmed on a fresh read.
		full, err := pl.get(ctx, p)
		if err != nil {
			return err
		}
		if oe := confirmAdoption(p, live, full); oe != nil {
			in.owner = oe
			return nil
		}
		d.Adopts = fmt.Sprintf("VidraResource %s (UID %s)", v.owner, v.uidShown)
	} else if v.err != nil {
		in.owner = v.err
		return nil
	}
	in.hand = parseHandEdits(live.GetManagedFields(), pl.in.Overrides, p.notIgnored)
	return nil
}

// isLocal reports whether vr's destination is the cluster Vidra runs in.
func isLocal(vr *v1alpha1.VidraResource) bool {
	return vr.Spec.Destination.KubeconfigSecretRef == nil && destination.IsLocalServer(vr.Spec.Destination.Server)
}

// list reads the VidraResources once.
func (pl *planner) list(ctx context.Context) error {
	if !pl.listed {
		pl.resources, pl.complete, pl.listErr = pl.live.Resources(ctx)
		pl.listed = true
	}
	return pl.listErr
}

// ownerState is Engine.ownerState on the reader's list: by UID, which
// decides, not the annotation's name, which anyone may rewrite.
func (pl *planner) ownerState(ctx context.Context, uid types.UID) (ownerState, error) {
	if err := pl.list(ctx); err != nil {
		return ownerUnknown, err
	}
	for _, vr := range pl.resources {
		if vr.UID == uid {
			return ownerLive, nil
		}
	}
	if !pl.complete {
		return ownerUnknown, nil
	}
	return ownerGone, nil
}

// sent is the object the apply of p over live sends, as applyMeta builds
// it (without the guards in its metadata): p's object, with the fields
// spec.ignore names taken from live or seeded. fromLive reports a value
// taken from live.
func (p *planned) sent(live *unstructured.Unstructured) *unstructured.Unstructured {
	obj, _ := p.withIgnored(live)
	return &unstructured.Unstructured{Object: obj}
}

// withIgnored is p's object with spec.ignore's fields as the apply over
// live sends them: a shallow copy when there are none.
func (p *planned) withIgnored(live *unstructured.Unstructured) (obj map[string]any, fromLive bool) {
	if len(p.ig.seeds) == 0 {
		return maps.Clone(p.obj.Object), false
	}
	obj = p.obj.DeepCopy().Object
	return obj, p.ig.withIgnored(obj, p.obj.Object, live)
}

// ownedBy reports whether live is vr's to let go: marked as vr's, and
// applied by Vidra. Anyone who may label an object can copy the marks, and
// a copy made in the place of an object Vidra applied would otherwise be
// deleted in its stead.
func ownedBy(vr *v1alpha1.VidraResource, live metav1.Object) bool {
	return live.GetLabels()[v1alpha1.OwnerUIDLabel] == string(vr.UID) && AppliedByVidra(live.GetManagedFields())
}

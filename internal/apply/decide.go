// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// The engine brings one object to its desired state in three steps:
// decide (this file) computes an action from what is known of the object,
// without a request; execute (object.go) performs it; settle (settle.go)
// records how it ended. Where the cache's word is not enough to decide, the
// action is a read, and the decision is taken again on what it found.

// actionKind is what the engine does with one object.
type actionKind int

const (
	// actInSync: live holds the manifest's object; nothing is written.
	actInSync actionKind = iota
	// actRead: the cache's absence is not to be trusted here; read the
	// object from the API server and decide again.
	actRead
	// actReadWhole: live was made immutable by someone: read it whole
	// (the cache keeps no other writer's fields) to name the writer, and
	// decide again.
	actReadWhole
	// actCreate: no object of that name is known; create it with an apply
	// that can only create.
	actCreate
	// actCreateOnly: the object exists and its apply policy is
	// IfNotPresent: it is never changed, whoever changed it.
	actCreateOnly
	// actReportDrift: under driftPolicy Report, list the drift (or the
	// deletion) and write nothing.
	actReportDrift
	// actApply: apply the manifest's object: the manifest changed, or the
	// write corrects drift.
	actApply
	// actMarksOnly: apply the object to add Vidra's own marks, which an
	// earlier version did not write: no correction of anyone's change.
	actMarksOnly
	// actTakeBack: hand edits own only fields the manifest sets: the forced
	// apply alone takes them back.
	actTakeBack
	// actTakeOver: hand edits own fields the manifest does not set: hand
	// them to Vidra (a managedFields rewrite), then apply.
	actTakeOver
	// actRemoveKeys: hand edits added labels or annotations and nothing
	// else beyond the manifest's fields: remove them with one patch, and
	// take over and apply only if more remains.
	actRemoveKeys
	// actRecreate: another writer made the object immutable, and force
	// allows deleting it: delete it and create it again.
	actRecreate
	// actConflict: the object is not this resource's to write.
	actConflict
	// actRefuse: the object cannot be brought to the manifest without a
	// recreation that force does not allow.
	actRefuse
)

var actionNames = [...]string{
	actInSync: "InSync", actRead: "Read", actReadWhole: "ReadWhole", actCreate: "Create",
	actCreateOnly: "CreateOnly", actReportDrift: "ReportDrift", actApply: "Apply",
	actMarksOnly: "MarksOnly", actTakeBack: "TakeBack", actTakeOver: "TakeOver",
	actRemoveKeys: "RemoveKeys", actRecreate: "Recreate", actConflict: "Conflict", actRefuse: "Refuse",
}

func (k actionKind) String() string {
	if int(k) < len(actionNames) {
		return actionNames[k]
	}
	return fmt.Sprintf("actionKind(%d)", int(k))
}

// action is what decide chose for one object, with what executing it needs.
type action struct {
	kind   actionKind
	reason string
	// object is what the action acts on when it is not the cached live
	// object: the object read whole (actReportDrift and actRecreate of an
	// immutable drift); for actReportDrift of a deletion, nil.
	object *unstructured.Unstructured
	// drift: for actReportDrift, what is listed (nil: nothing is, and an
	// earlier report is cleared); for a write, the drift it corrects (nil
	// when the manifest changed, or only marks are added).
	drift *v1alpha1.DriftRecord
	// marks: the write only adds Vidra's marks (see actMarksOnly), also
	// when hand edits make it a take-back.
	marks bool
	// managers are the hand-edit managers whose fields the write takes
	// back, and keys the labels and annotations actRemoveKeys removes.
	managers []string
	keys     [][]string
	// writer names who made the object immutable (actRecreate).
	writer string
	// err is the refusal of actConflict and actRefuse.
	err *ObjectError
}

// evidence is everything decide reads of one object: the live object as
// the cache or a read showed it, the engine's record, the owner check and
// the hand edits. Gathering it is the executor's; deciding on it asks
// nothing of anyone.
type evidence struct {
	// live is the object, nil when none is known; fresh when it (or its
	// absence) was read from the API server in this pass rather than taken
	// from a cache.
	live  *unstructured.Unstructured
	fresh bool
	// unmanaged: an earlier pass found the object without Vidra's marks.
	unmanaged bool
	// hash is the manifest object's; rec the engine's record of its last
	// apply, when known.
	hash  uint64
	rec   appliedRecord
	known bool
	// unchanged: the object's part of the manifest is what Vidra last
	// applied (see unchangedSince); inventory: it was in the inventory
	// before this pass.
	unchanged bool
	inventory bool
	// report: driftPolicy Report; force: spec.force or the object's force
	// annotation.
	report bool
	force  bool
	// owner is the verdict on live's marks: nil when the object is this
	// resource's to write (or to adopt).
	owner *ObjectError
	// hand are live's hand edits, without the fields spec.ignore hands to
	// others; set only when owner is nil.
	hand handEdits
	// whole is the object read whole for an immutable drift (wholeRead
	// once it was; nil when it was gone).
	whole     *unstructured.Unstructured
	wholeRead bool
	now       time.Time
}

// newEvidence starts the evidence on p, an object of vr's manifest, from
// the engine's record of its last apply (rec, when known): what decide
// reads before anyone looks at the live object.
func newEvidence(p *planned, vr *v1alpha1.VidraResource, rec appliedRecord, known bool, now time.Time) *evidence {
	in := &evidence{hash: hashObject(p.obj), rec: rec, known: known, inventory: p.inventory,
		report: vr.ReportsDrift(), force: vr.Spec.Force || p.policy.force, now: now}
	in.unchanged = unchangedSince(rec, known, in.hash, p.inventory, vr.Generation == vr.Status.ObservedGeneration)
	return in
}

// unchangedSince reports whether the manifest's object is the one Vidra last
// applied, so that a write would only undo someone else's change: drift.
// Without a record (after a restart) it is when the object was in the
// inventory and the status describes the resource's generation: the cache
// the status was read from may not show the last status write yet, so
// only then.
func unchangedSince(rec appliedRecord, known bool, hash uint64, inventory, observed bool) bool {
	if known {
		return rec.hash == hash
	}
	return inventory && observed
}

// decide chooses what to do with p from in. It is pure: every request it
// would need is an action (actRead, actReadWhole) whose answer the next
// decision reads.
func decide(p *planned, in *evidence) action {
	if in.live == nil {
		return decideAbsent(p, in)
	}
	if in.owner != nil {
		return action{kind: actConflict, reason: "not this resource's to write", err: in.owner}
	}
	if p.policy.createOnly {
		return action{kind: actCreateOnly, reason: "exists, and apply: IfNotPresent never changes it"}
	}
	if immutableDrift(p.obj, in.live) {
		if a, ok := decideImmutable(p, in); ok {
			return a
		}
	}
	return decideWrite(p, in)
}

// decideAbsent decides for an object no cache or read has shown.
func decideAbsent(p *planned, in *evidence) action {
	deleted := in.report && in.unchanged && in.inventory
	switch {
	case in.unmanaged && !in.fresh:
		// Known to exist without Vidra's marks: one read tells whether it
		// is still there, where the create-only apply would fail and read.
		return action{kind: actRead, reason: "known to exist without Vidra's marks"}
	case deleted && !in.fresh:
		// A cache can lag a creation; a deletion is reported only once a
		// read confirms it.
		return action{kind: actRead, reason: "a deletion is reported only once a read confirms it"}
	case deleted:
		d := driftOf(p, nil, handEdits{}, in.now)
		return action{kind: actReportDrift, reason: "deleted", drift: &d}
	}
	return action{kind: actCreate, reason: "absent"}
}

// decideImmutable decides for an object someone made immutable while its
// manifest does not ask it. ok is false when the flag turns out to be
// Vidra's own (an earlier manifest asked it: the apply fails ImmutableField
// as for any immutable change) or gone: the decision goes on as usual, on
// the cached object.
func decideImmutable(p *planned, in *evidence) (a action, ok bool) {
	if !in.wholeRead {
		return action{kind: actReadWhole, reason: "made immutable by another writer: the cache does not name it"}, true
	}
	full := in.whole
	if full == nil || !immutableDrift(p.obj, full) {
		return action{}, false
	}
	who, named := immutableManager(full.GetManagedFields())
	if named && isVidraManager(who) {
		return action{}, false
	}
	// The manager is what the writer's client chose, cut and made
	// readable as drift records quote it.
	d := driftOf(p, full, handEdits{fields: &fieldpath.Set{}}, in.now)
	d.Fields, d.Manager = []string{"/immutable"}, boundedManager(who)
	writer := "a writer its managedFields do not name"
	if named {
		writer = "field manager " + d.Manager
	}
	switch {
	case in.report:
		return action{kind: actReportDrift, reason: "made immutable", object: full, drift: &d}, true
	case in.force:
		return action{kind: actRecreate, reason: "made immutable, force", object: full, drift: &d, writer: writer}, true
	}
	return action{kind: actRefuse, reason: "made immutable, no force", err: &ObjectError{Key: p.key, Index: p.index, Reason: v1alpha1.ReasonImmutableSet, Err: fmt.Errorf(
		"made immutable (immutable: true) by %s, which the manifest does not ask: its data can no longer be changed. "+
			"Set spec.force or the annotation %s: enabled to let Vidra recreate it, delete it (Vidra creates it again), or add immutable: true to the manifest",
		writer, v1alpha1.ForcePolicyAnnotation)}}, true
}

// decideWrite decides for a live object this resource may write: in sync,
// drift to report, or a write and what it takes back.
func decideWrite(p *planned, in *evidence) action {
	if inSync(p, in) {
		return action{kind: actInSync, reason: "live holds the manifest's object"}
	}
	a := action{kind: actApply, reason: "the manifest changed", managers: in.hand.managers()}
	if in.unchanged {
		d := driftOf(p, in.live, in.hand, in.now)
		switch {
		case marksOnly(d):
			a.kind, a.marks, a.reason = actMarksOnly, true, "only Vidra's marks are missing"
		case in.report && len(d.Fields) > 0:
			return action{kind: actReportDrift, reason: "drifted", object: in.live, drift: &d}
		case in.report:
			// Fields that hold the manifest's values under another manager
			// (an edit undone by hand) are no drift to report.
			return action{kind: actReportDrift, reason: "values as the manifest says", object: in.live}
		default:
			a.drift, a.reason = &d, "drifted"
		}
	}
	if len(a.managers) == 0 {
		return a
	}
	if in.hand.coveredBy(p.obj.Object) {
		a.kind = actTakeBack
		return a
	}
	a.kind = actTakeOver
	if keys, ok := in.hand.addedMetadataKeys(p.obj.Object); ok {
		a.kind, a.keys = actRemoveKeys, keys
	}
	return a
}

// inSync reports whether live already holds p's object: either it is the
// very version Vidra last applied, or every field the manifest sets has its
// value; and no hand edit owns a field.
func inSync(p *planned, in *evidence) bool {
	if len(in.hand.managers()) > 0 {
		return false
	}
	if in.known && in.rec.rv == in.live.GetResourceVersion() && in.rec.hash == in.hash {
		return true
	}
	// Not after the manifest changed since Vidra's last apply: a field it
	// dropped is still in live, so live contains the new object, and only
	// an apply removes that field.
	return isSubset(p.obj.Object, in.live.Object) && (!in.known || in.rec.hash == in.hash)
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/health"
	"github.com/vidra-operator/vidra/internal/statusfit"
	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// maxMessage bounds condition messages (see wording.MaxMessage).
const maxMessage = wording.MaxMessage

// maxDriftRecords bounds status.drift; the Drifted condition counts all.
const maxDriftRecords = 100

// writeStatus computes the status of a finished reconcile, records Events for
// what changed, and writes the status only when it differs from what the
// resource holds: a reconcile that changed nothing writes nothing. With
// spec.wait, recheck is the time left until the wait for health times out,
// when the reconcile is still waiting; the resource must be looked at again
// then, even if no object changes.
func (c *Controller) writeStatus(ctx context.Context, r *apply.Pass, inventoryCluster *v1alpha1.ClusterReference) (recheck time.Duration, err error) {
	vr := r.VR
	now := metav1.NewTime(c.clock.Now())
	st := vr.Status.DeepCopy()
	st.ObservedGeneration = vr.Generation
	st.ManagedResources = r.Out.Inventory
	st.InventoryCluster = inventoryCluster
	st.ManagedCount = int32(len(r.Out.Inventory))
	if r.Out.Changed > 0 {
		st.LastSyncTime = &now
	}
	if v, ok := vr.Annotations[v1alpha1.RequestedAtAnnotation]; ok {
		st.LastHandledReconcileAt = handledRequest(v)
	}
	// A new generation (the manifest or the spec changed) starts a new
	// wait for health.
	if st.HealthCheckStartTime == nil || vr.Status.ObservedGeneration != vr.Generation {
		st.HealthCheckStartTime = &now
	}
	deadline := st.HealthCheckStartTime.Add(vr.EffectiveTimeout())

	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: truncate(msg), ObservedGeneration: vr.Generation, LastTransitionTime: now,
		})
	}
	errs := r.Out.Errs
	if len(errs) == 0 {
		// What the resource's objects now are; a failed pass keeps the
		// sums of the content last applied.
		st.ManifestFrom = r.Out.Sources
	}
	var conflicts []*apply.ObjectError
	for _, e := range errs {
		if e.Conflict {
			conflicts = append(conflicts, e)
		}
	}
	contended := r.Contended(now.Time)
	switch {
	case len(conflicts) > 0:
		set(v1alpha1.ConditionConflict, metav1.ConditionTrue, conflicts[0].Reason, joinErrors(conflicts))
	case len(contended) > 0:
		set(v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonFieldConflict, wording.List(contended))
	default:
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionConflict)
	}
	st.DriftHistory = r.Out.DriftHistory
	// drifted counts the objects that differ from the manifest, which
	// status.drift may not all list.
	drifted := 0
	if vr.ReportsDrift() {
		drifted = len(r.Out.Drift)
		// Bounded: every object of a large manifest may drift at once, and
		// a status over the API server's size limit could not be written
		// at all.
		st.Drift = r.Out.Drift[:min(len(r.Out.Drift), maxDriftRecords)]
		if n := len(r.Out.Drift); n > 0 {
			descs := make([]string, len(st.Drift))
			for i, d := range st.Drift {
				descs[i] = apply.DescribeDrift(d)
			}
			set(v1alpha1.ConditionDrifted, metav1.ConditionTrue, v1alpha1.ReasonDriftDetected,
				fmt.Sprintf("%s %s from the manifest and %s left as %s (spec.driftPolicy is Report; set it to Correct to restore %s): %s",
					wording.Count(n, "object"), wording.Agree(n, "differs", "differ"), wording.Agree(n, "is", "are"), wording.Agree(n, "it is", "they are"), wording.Agree(n, "it", "them"), wording.List(descs)))
		} else {
			set(v1alpha1.ConditionDrifted, metav1.ConditionFalse, v1alpha1.ReasonNoDrift, "Every object is as the manifest says")
		}
	} else {
		st.Drift = nil
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionDrifted)
	}
	hs := health.Summarize(r.Out.Inventory)
	if len(r.Out.Inventory) == 0 && len(errs) > 0 {
		// No object, because none applied: an empty set is not a healthy
		// one, and the printer column would say AllCurrent beside Failed.
		set(v1alpha1.ConditionHealthy, metav1.ConditionUnknown, v1alpha1.ReasonNothingApplied, "No object is managed yet: the Ready condition says why")
	} else {
		set(v1alpha1.ConditionHealthy, hs.Status, hs.Reason, hs.Message)
	}
	waiting := vr.Spec.Wait && hs.Status != metav1.ConditionTrue
	switch {
	case len(errs) == 0 && waiting && (hs.Failed || !now.Time.Before(deadline)):
		msg := "Applied and in sync, but " + hs.Message
		if !hs.Failed {
			msg = fmt.Sprintf("Not healthy within %s (spec.timeout): %s", vr.EffectiveTimeout(), hs.Message)
		}
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonHealthCheckFailed, msg)
		set(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonHealthCheckFailed, msg)
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionReconciling)
		st.DeployState = v1alpha1.DeployStateFailed
	case len(errs) == 0 && waiting:
		msg := "Applied and in sync; waiting for health (spec.wait): " + hs.Message
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressing, msg)
		set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProgressing, msg)
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionStalled)
		st.DeployState = v1alpha1.DeployStateRunning
		recheck = deadline.Sub(now.Time)
	case len(errs) == 0:
		msg := fmt.Sprintf("%s applied and in sync", wording.Count(len(r.Out.Inventory), "object"))
		if vr.Spec.Wait {
			msg = fmt.Sprintf("%s applied, in sync and healthy", wording.Count(len(r.Out.Inventory), "object"))
		}
		if len(contended) > 0 {
			// Ready, yet not settled: -o wide shows only this message.
			msg += "; Conflict: " + wording.List(contended)
		}
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled, msg)
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionReconciling)
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionStalled)
		st.DeployState = v1alpha1.DeployStateSucceeded
	case r.Out.Retryable():
		msg := failedMessage(r)
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, errs[0].Reason, msg)
		set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProgressing, "Retrying with backoff: "+msg)
		// Retried, because the fix may come from elsewhere (a CRD installed,
		// a role bound, an object deleted), but most likely only when a
		// person acts: Failed and Stalled say so, not Running.
		if p := slices.IndexFunc(errs, needsPerson); p >= 0 {
			set(v1alpha1.ConditionStalled, metav1.ConditionTrue, errs[p].Reason, msg)
			st.DeployState = v1alpha1.DeployStateFailed
		} else {
			meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionStalled)
			st.DeployState = v1alpha1.DeployStateRunning
		}
	default:
		msg := failedMessage(r)
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, errs[0].Reason, msg)
		set(v1alpha1.ConditionStalled, metav1.ConditionTrue, errs[0].Reason, msg)
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionReconciling)
		st.DeployState = v1alpha1.DeployStateFailed
	}

	// Within its size limit, whatever the objects and their writers put
	// in it.
	statusfit.Fit(st, drifted)
	c.setCacheLimited(vr, st, now)

	c.recordEvents(r, st)
	if equality.Semantic.DeepEqual(vr.Status, *st) {
		return recheck, nil
	}
	vr.Status = *st
	return recheck, c.updateStatus(ctx, vr)
}

// needsPerson tells the failures that are retried but that time alone
// rarely fixes: a kind nobody serves (a typo, or a CRD not installed), a
// namespace that does not exist, a write the identity may not make, an
// object Vidra does not own.
func needsPerson(e *apply.ObjectError) bool {
	switch e.Reason {
	case v1alpha1.ReasonUnknownKind, v1alpha1.ReasonNamespaceNotFound, v1alpha1.ReasonForbidden, v1alpha1.ReasonUnmanagedExists,
		v1alpha1.ReasonServiceAccountNotFound, v1alpha1.ReasonSourceUnavailable:
		return true
	}
	return false
}

// recordEvents emits Events for what a person wants to see: writes that
// happened, and failures when they first appear or change, never one per
// no-op reconcile or per identical retry.
func (c *Controller) recordEvents(r *apply.Pass, st *v1alpha1.VidraResourceStatus) {
	vr, out := r.VR, &r.Out
	if len(out.Drifted) > 0 {
		c.events.Event(vr, false, "DriftCorrected", "Corrected drift: %s", truncate(strings.Join(out.Drifted, "; ")))
	}
	if len(out.NewDrift) > 0 {
		c.events.Event(vr, true, "DriftDetected", "Found drift and left it in place (spec.driftPolicy is Report): %s", truncate(strings.Join(out.NewDrift, "; ")))
	}
	if len(out.Kept) > 0 {
		c.events.Event(vr, false, "Kept", "Kept %s that left the manifest, as their annotation %s asks, without Vidra's marks: %s",
			wording.Count(len(out.Kept), "object"), v1alpha1.PrunePolicyAnnotation, truncate(strings.Join(out.Kept, ", ")))
	}
	// Restored objects have their own Event; Applied tells of the rest,
	// except a new resource's first apply: its Ready condition says the
	// same, and an Event for each new resource would be one request in
	// six of a fleet's first converge.
	created, configured := out.Created-out.DriftDeleted, out.Configured-out.DriftEdited
	firstApply := vr.Status.ObservedGeneration == 0 && len(vr.Status.ManagedResources) == 0 && configured == 0 && out.Recreated == 0
	if created+configured > 0 && !firstApply {
		how := fmt.Sprintf("%d created, %d configured", created-out.Recreated, configured)
		if out.Recreated > 0 {
			how += fmt.Sprintf(", %d recreated for spec.force", out.Recreated)
		}
		c.events.Event(vr, false, "Applied", "Applied %s (%s); %d managed", wording.Count(created+configured, "object"), how, len(out.Inventory))
	}
	if len(out.Pruned) > 0 {
		c.events.Event(vr, false, "Pruned", "Pruned %s: %s", wording.Count(len(out.Pruned), "object"), truncate(strings.Join(out.Pruned, ", ")))
	}
	if len(out.Released) > 0 {
		c.events.Event(vr, false, "Released", "Released %s that left the manifest, without deleting them (spec.prune is false); Vidra's marks removed: %s",
			wording.Count(len(out.Released), "object"), truncate(strings.Join(out.Released, ", ")))
	}
	// Another writer fighting over a field: one Warning when it starts.
	if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionConflict); cond != nil && cond.Reason == v1alpha1.ReasonFieldConflict {
		if prev := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionConflict); prev == nil || prev.Reason != cond.Reason {
			c.events.Event(vr, true, "Conflict", "%s", cond.Message)
		}
	}
	if len(out.Errs) == 0 {
		return
	}
	prev := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
	cur := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	if prev != nil && prev.Status == cur.Status && prev.Reason == cur.Reason && prev.Message == cur.Message {
		return
	}
	if held := apply.HeldMessage(out.Held); held != "" {
		c.events.Event(vr, true, v1alpha1.ReasonPruneHeld, "%s", held)
	}
	reason := "ApplyFailed"
	switch {
	case slices.ContainsFunc(out.Errs, func(e *apply.ObjectError) bool { return e.Conflict }):
		reason = "Conflict"
	case !out.Errs[0].ForObject(), out.Errs[0].Index < 0, out.Errs[0].Reason == v1alpha1.ReasonImmutableSet:
		// Not one object's failure to apply: the manifest, the destination,
		// or a prune, whose reason says more than ApplyFailed.
		reason = cur.Reason
	}
	c.events.Event(vr, true, reason, "%s", cur.Message)
}

// writeSuspended records that the resource is suspended, once.
func (c *Controller) writeSuspended(ctx context.Context, vr *v1alpha1.VidraResource) error {
	st := vr.Status.DeepCopy()
	st.DeployState = v1alpha1.DeployStateStale
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionReconciling)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonSuspended,
		Message: "Reconciliation is suspended (spec.suspend); drift is not corrected", ObservedGeneration: vr.Generation,
		LastTransitionTime: metav1.NewTime(c.clock.Now()),
	})
	st.ObservedGeneration = vr.Generation
	// The wait for health starts again when reconciling resumes.
	st.HealthCheckStartTime = nil
	if equality.Semantic.DeepEqual(vr.Status, *st) {
		return nil
	}
	c.events.Event(vr, false, "Suspended", "Reconciliation suspended")
	vr.Status = *st
	return c.updateStatus(ctx, vr)
}

// writeBlocked records that the resource applies nothing because of its
// dependencies: Ready False with the reason, Reconciling while it waits
// for them, Stalled when only a change of the resource can help. The
// inventory and the objects' health stay as they were.
func (c *Controller) writeBlocked(ctx context.Context, vr *v1alpha1.VidraResource, b *blocked) error {
	now := metav1.NewTime(c.clock.Now())
	st := vr.Status.DeepCopy()
	// A new generation held back here is not being waited on for health:
	// its wait starts when writeStatus first sees it applied. Recording
	// the generation as observed while keeping the previous generation's
	// start would make that first writeStatus keep it too, and a change
	// held longer than spec.timeout would fail its health check at once.
	if vr.Status.ObservedGeneration != vr.Generation {
		st.HealthCheckStartTime = nil
	}
	st.ObservedGeneration = vr.Generation
	if v, ok := vr.Annotations[v1alpha1.RequestedAtAnnotation]; ok {
		st.LastHandledReconcileAt = handledRequest(v)
	}
	set := func(t string, reason string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: metav1.ConditionTrue, Reason: reason, Message: truncate(b.message), ObservedGeneration: vr.Generation, LastTransitionTime: now,
		})
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: b.reason, Message: truncate(b.message),
		ObservedGeneration: vr.Generation, LastTransitionTime: now,
	})
	if len(st.ManagedResources) == 0 {
		// Held back before applying anything: as after a failure that left
		// no object, an empty set is not a healthy one.
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionHealthy, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonNothingApplied,
			Message: "No object is managed yet: the Ready condition says why", ObservedGeneration: vr.Generation, LastTransitionTime: now,
		})
	}
	if b.stalled {
		set(v1alpha1.ConditionStalled, b.reason)
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionReconciling)
		st.DeployState = v1alpha1.DeployStateFailed
	} else {
		set(v1alpha1.ConditionReconciling, b.reason)
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionStalled)
		st.DeployState = v1alpha1.DeployStatePending
		if len(st.ManagedResources) > 0 {
			st.DeployState = v1alpha1.DeployStateRunning
		}
	}
	if equality.Semantic.DeepEqual(vr.Status, *st) {
		return nil
	}
	if prev := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady); prev == nil || prev.Reason != b.reason || prev.Message != truncate(b.message) {
		c.events.Event(vr, b.stalled, b.reason, "%s", truncate(b.message))
	}
	vr.Status = *st
	return c.updateStatus(ctx, vr)
}

// failedMessage is the Ready message of a reconcile that failed: its
// failures, then the prunes they held back, if any. The held prunes come
// first when the failures are many: a message is cut at maxMessage, and
// what is held must not be what is cut.
func failedMessage(r *apply.Pass) string {
	held := apply.HeldMessage(r.Out.Held)
	if held == "" {
		return joinErrors(r.Out.Errs)
	}
	return held + wording.ListSeparator + joinErrors(r.Out.Errs)
}

func joinErrors(errs []*apply.ObjectError) string {
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		parts = append(parts, e.Message())
	}
	return wording.List(parts)
}

// maxRequestedAt bounds the echo of the requested-at annotation in status.
// Annotations may hold 256 KiB, and a copy of that much in status could take
// a resource with a large manifest past etcd's size limit, after which no
// status write of it would succeed. The values tools write, timestamps, are
// a few dozen bytes.
const maxRequestedAt = 256

// handledRequest is what status echoes of a requested-at value: the value
// itself, or, over maxRequestedAt, its start and "...", so that a tool
// waiting for its own longer value sees it was not echoed as it was.
func handledRequest(v string) string { return wording.Cut(v, maxRequestedAt, "...") }

// truncate cuts a message to maxMessage bytes, its end replaced by "...",
// at a character boundary: a character cut in two would read back from
// the API server as another, and the status would be written again on
// every reconcile.
func truncate(s string) string { return wording.Message(s) }

// metadataOnly asks the API server to answer a write with the object's
// metadata alone: Vidra reads nothing of the answer to a status write, and
// encoding the whole resource, manifest included, is work for both sides.
// JSON only, so that an error still decodes as a Status.
const metadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// updateStatus writes vr's status with an update guarded by its
// resourceVersion, like UpdateStatus, but reads back only metadata.
func (c *Controller) updateStatus(ctx context.Context, vr *v1alpha1.VidraResource) error {
	err := c.status.Put().
		Namespace(vr.Namespace).Resource(v1alpha1.ResourcePlural).Name(vr.Name).SubResource("status").
		Param("fieldManager", v1alpha1.StatusFieldManager).
		SetHeader("Accept", metadataOnly).
		Body(vr).Do(ctx).Error()
	if err != nil {
		return fmt.Errorf("update status of VidraResource %s/%s: %w", vr.Namespace, vr.Name, err)
	}
	return nil
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahubsync

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// maxRequestedAt bounds the echo of the requested-at annotation.
const maxRequestedAt = 256

// maxProblem bounds one artifact's problem in status.
const maxProblem = 256

// status gathers what a pass found and did, and becomes the sync's status
// once, at the end of the pass.
type status struct {
	sync *v1alpha1.InfrahubSync
	now  metav1.Time
	// listed is true once Infrahub answered the query: only then does the
	// artifact list describe Infrahub.
	listed    bool
	artifacts map[string]v1alpha1.SyncedArtifact
	// applied and deleted count the children written and deleted.
	applied, deleted int
	// reason and msg are the failure of the pass, if any.
	reason, msg string
	stalled     bool
	suspend     bool
	// failures are the artifacts whose write or download failed.
	failures int
	firstErr string
}

func newStatus(sync *v1alpha1.InfrahubSync, now time.Time) *status {
	return &status{sync: sync, now: metav1.NewTime(now.Truncate(time.Second)), artifacts: map[string]v1alpha1.SyncedArtifact{}}
}

func entry(a infrahub.Artifact) v1alpha1.SyncedArtifact {
	return v1alpha1.SyncedArtifact{ID: a.ID, Name: a.Name, Checksum: a.Checksum, StorageID: a.StorageID, Target: a.Target}
}

func (s *status) current(a infrahub.Artifact, lastChanged *metav1.Time) {
	s.listed = true
	e := entry(a)
	e.VidraResource = a.ID
	e.LastChanged = lastChanged
	s.artifacts[a.ID] = e
}

func (s *status) changed(a infrahub.Artifact) {
	s.listed = true
	s.applied++
	e := entry(a)
	e.VidraResource = a.ID
	now := s.now
	e.LastChanged = &now
	s.artifacts[a.ID] = e
}

func (s *status) skipped(k Skip, lastChanged *metav1.Time) {
	s.listed = true
	e := entry(k.Artifact)
	if k.Kept {
		e.VidraResource, e.LastChanged = k.Artifact.ID, lastChanged
	}
	e.Problem = wording.Cut(k.Problem, maxProblem, "...")
	s.artifacts[k.Artifact.ID] = e
}

func (s *status) failed(a infrahub.Artifact, err error) {
	s.listed = true
	s.failures++
	if s.firstErr == "" {
		s.firstErr = err.Error()
	}
	e := entry(a)
	e.Problem = wording.Cut("not applied: "+err.Error(), maxProblem, "...")
	s.artifacts[a.ID] = e
}

func (s *status) removed(string) { s.listed = true; s.deleted++ }

func (s *status) suspended() { s.suspend = true }

func (s *status) refused(err error) {
	s.reason, s.msg, s.stalled = v1alpha1.ReasonCredentialsUnavailable, err.Error(), true
	var r *refusal
	if errors.As(err, &r) {
		s.reason = r.reason
	} else if !isCredentialsError(err) {
		// Reading a Secret failed for a reason a retry may fix.
		s.stalled = false
	}
}

func (s *status) unavailable(err error) {
	if s.reason == "" {
		s.reason, s.msg = v1alpha1.ReasonInfrahubUnavailable, err.Error()
	}
}

func (s *status) tooMany(n int) {
	s.reason, s.stalled = v1alpha1.ReasonTooManyArtifacts, true
	s.msg = fmt.Sprintf("Infrahub listed %d artifacts, more than the %d one InfrahubSync takes: nothing was changed; split the artifacts between syncs (by artefactName or definitionName)", n, v1alpha1.MaxSyncArtifacts)
}

// build returns the status the pass leads to, from the previous one.
func (s *status) build() v1alpha1.InfrahubSyncStatus {
	prev := s.sync.Status
	out := *prev.DeepCopy()
	out.ObservedGeneration = s.sync.Generation
	out.LastHandledReconcileAt = wording.Cut(s.sync.Annotations[v1alpha1.RequestedAtAnnotation], maxRequestedAt, "...")
	if s.listed || (s.reason == "" && !s.suspend) {
		// A failed query tells nothing about the artifacts: the list
		// stays as it was.
		out.Artifacts = nil
		for _, id := range slices.Sorted(maps.Keys(s.artifacts)) {
			out.Artifacts = append(out.Artifacts, s.artifacts[id])
		}
		out.ArtifactCount = int32(len(out.Artifacts))
	}
	if s.applied > 0 || s.deleted > 0 {
		now := s.now
		out.LastSyncTime = &now
	}
	gen := s.sync.Generation
	set := func(t string, st metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&out.Conditions, metav1.Condition{Type: t, Status: st, Reason: reason, Message: wording.Message(msg), ObservedGeneration: gen, LastTransitionTime: s.now})
	}
	notApplied := 0
	firstProblem := ""
	for _, a := range out.Artifacts {
		if a.Problem != "" {
			notApplied++
			if firstProblem == "" {
				firstProblem = a.ID + ": " + a.Problem
			}
		}
	}
	switch {
	case s.suspend:
		out.SyncState = v1alpha1.SyncStateStale
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSuspended, "spec.suspend is true: Infrahub is not polled; the VidraResources of the sync are still reconciled")
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonSuspended, "suspended")
		set(v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonSuspended, "suspended")
	case s.reason != "":
		out.SyncState = v1alpha1.SyncStateFailed
		msg := s.msg
		if s.reason == v1alpha1.ReasonInfrahubUnavailable {
			msg += "; nothing applied was removed, and Vidra retries with backoff"
		}
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, s.reason, msg)
		if s.stalled {
			set(v1alpha1.ConditionStalled, metav1.ConditionTrue, s.reason, msg)
			set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, s.reason, "waiting for a change of the sync or its Secrets")
		} else {
			set(v1alpha1.ConditionStalled, metav1.ConditionFalse, s.reason, "retrying")
			set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, s.reason, "retrying with backoff")
		}
	case s.failures > 0:
		out.SyncState = v1alpha1.SyncStateFailed
		msg := fmt.Sprintf("%s of %d not applied yet, retrying with backoff: %s", wording.Count(s.failures, "artifact"), len(out.Artifacts), s.firstErr)
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed, msg)
		set(v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed, "retrying")
		set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonApplyFailed, "retrying with backoff")
	case notApplied > 0:
		out.SyncState = v1alpha1.SyncStateRunning
		msg := fmt.Sprintf("%s of %d not applied (status.artifacts says why): %s", wording.Count(notApplied, "artifact"), len(out.Artifacts), firstProblem)
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonArtifactsNotApplied, msg)
		set(v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonArtifactsNotApplied, "each artifact is looked at again at every poll")
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonArtifactsNotApplied, "waiting for the next poll")
	default:
		out.SyncState = v1alpha1.SyncStateSucceeded
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSynced, fmt.Sprintf("%s of branch %s applied as VidraResources", wording.Count(len(out.Artifacts), "artifact"), s.branch()))
		set(v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonSynced, "in sync")
		set(v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonSynced, "in sync")
	}
	return out
}

func (s *status) branch() string {
	if b := s.sync.Spec.Source.TargetBranch; b != "" {
		return b
	}
	return "main"
}

// writeStatus writes the status the pass leads to, only when it differs
// from the one stored, and records the Events of what changed.
func (c *Controller) writeStatus(ctx context.Context, sync *v1alpha1.InfrahubSync, s *status) error {
	out := s.build()
	if equality.Semantic.DeepEqual(out, sync.Status) {
		return nil
	}
	c.events(sync, s, out)
	up := sync.DeepCopy()
	up.Status = out
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, err := c.vidra.InfrahubV1alpha1().InfrahubSyncs(sync.Namespace).UpdateStatus(ctx, up, metav1.UpdateOptions{FieldManager: v1alpha1.InfrahubSyncFieldManager})
	if err != nil {
		return fmt.Errorf("write status of InfrahubSync %s/%s: %w", sync.Namespace, sync.Name, err)
	}
	return nil
}

// events records what a person wants to see: changes applied, and a
// failure when Ready's reason or message changes, never one per poll.
func (c *Controller) events(sync *v1alpha1.InfrahubSync, s *status, out v1alpha1.InfrahubSyncStatus) {
	if s.applied > 0 || s.deleted > 0 {
		var parts []string
		if s.applied > 0 {
			parts = append(parts, wording.Count(s.applied, "artifact")+" applied")
		}
		if s.deleted > 0 {
			parts = append(parts, wording.Count(s.deleted, "VidraResource")+" deleted (their artifacts left Infrahub's answer)")
		}
		c.recorder.Event(sync, false, "Synced", "%s", strings.Join(parts, ", "))
	}
	cur := meta.FindStatusCondition(out.Conditions, v1alpha1.ConditionReady)
	old := meta.FindStatusCondition(sync.Status.Conditions, v1alpha1.ConditionReady)
	if cur != nil && cur.Status != metav1.ConditionTrue && (old == nil || old.Reason != cur.Reason || old.Message != cur.Message) {
		c.recorder.Event(sync, true, cur.Reason, "%s", cur.Message)
	}
}

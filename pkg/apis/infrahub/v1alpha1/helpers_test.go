// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAccessorsSayWhatAFieldMeansWhenUnset(t *testing.T) {
	vr := &VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}}
	if got := vr.EffectiveTimeout(); got != DefaultTimeout {
		t.Errorf("unset timeout = %v, want %v", got, DefaultTimeout)
	}
	vr.Spec.Timeout = &metav1.Duration{}
	if got := vr.EffectiveTimeout(); got != DefaultTimeout {
		t.Errorf("zero timeout = %v, want %v", got, DefaultTimeout)
	}
	vr.Spec.Timeout = &metav1.Duration{Duration: 30 * time.Second}
	if got := vr.EffectiveTimeout(); got != 30*time.Second {
		t.Errorf("timeout = %v, want 30s", got)
	}
	if vr.ReportsDrift() {
		t.Error("an unset driftPolicy reports drift, want corrected")
	}
	vr.Spec.DriftPolicy = DriftPolicyReport
	if !vr.ReportsDrift() {
		t.Error("driftPolicy Report does not report drift")
	}
	if got := vr.DefaultNamespace(); got != "team-a" {
		t.Errorf("default namespace = %q, want the resource's own", got)
	}
	vr.Spec.Destination.Namespace = "apps"
	if got := vr.DefaultNamespace(); got != "apps" {
		t.Errorf("default namespace = %q, want spec.destination.namespace", got)
	}
}

func TestReadinessIsOfTheCurrentGenerationAndNotOfADeletion(t *testing.T) {
	vr := &VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Generation: 2}}
	if vr.IsReady() || vr.Readiness() != "not reconciled yet" {
		t.Errorf("never reconciled: ready %v, %q", vr.IsReady(), vr.Readiness())
	}
	vr.Status.Conditions = []metav1.Condition{{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonReconciled, ObservedGeneration: 1}}
	if vr.IsReady() || vr.Readiness() != "its latest change is not reconciled yet" {
		t.Errorf("Ready for the generation before: ready %v, %q", vr.IsReady(), vr.Readiness())
	}
	vr.Status.Conditions[0].ObservedGeneration = 2
	if !vr.IsReady() {
		t.Error("Ready for the current generation is not ready")
	}
	vr.DeletionTimestamp = &metav1.Time{}
	if vr.IsReady() || vr.Readiness() != "being deleted" {
		t.Errorf("being deleted: ready %v, %q", vr.IsReady(), vr.Readiness())
	}
	if got := vr.DependencyNamespace(DependencyReference{Name: "db"}); got != "team-a" {
		t.Errorf("a dependency naming no namespace is in %q, want the resource's", got)
	}
}

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

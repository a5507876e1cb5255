// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The meaning of a spec field that more than one part of Vidra reads is
// said once, here: the operator, kubectl vidra and the InfrahubSync
// controller ask these rather than read the field.

// DefaultTimeout is how long spec.wait waits for the objects of a new
// manifest when spec.timeout is not set.
const DefaultTimeout = 5 * time.Minute

// EffectiveTimeout is how long spec.wait waits for the objects of a new
// manifest to be healthy: spec.timeout, or DefaultTimeout when it is unset
// or not positive (the schema refuses that; a resource stored under a CRD
// without the validation may still carry it).
func (vr *VidraResource) EffectiveTimeout() time.Duration {
	if t := vr.Spec.Timeout; t != nil && t.Duration > 0 {
		return t.Duration
	}
	return DefaultTimeout
}

// ReportsDrift reports whether drift of the resource's objects is listed
// in its status and left alone (spec.driftPolicy Report) rather than
// corrected.
func (vr *VidraResource) ReportsDrift() bool { return vr.Spec.DriftPolicy == DriftPolicyReport }

// DeletePropagation is the propagation policy of the deletes of the
// resource's objects, pruned or deleted with it (spec.deletionPropagation):
// Foreground when asked for, else Background.
func (vr *VidraResource) DeletePropagation() metav1.DeletionPropagation {
	if vr.Spec.DeletionPropagation == DeletionPropagationForeground {
		return metav1.DeletePropagationForeground
	}
	return metav1.DeletePropagationBackground
}

// DefaultNamespace is where the namespaced objects of the manifest that
// name no namespace go: spec.destination.namespace, or the resource's own.
func (vr *VidraResource) DefaultNamespace() string {
	if ns := vr.Spec.Destination.Namespace; ns != "" {
		return ns
	}
	return vr.Namespace
}

// DependencyNamespace is the namespace of the resource d names in
// spec.dependsOn: its own, or the resource's when it names none.
func (vr *VidraResource) DependencyNamespace(d DependencyReference) string {
	if d.Namespace != "" {
		return d.Namespace
	}
	return vr.Namespace
}

// IsReady is what a dependent waits for: Ready=True for the resource's
// current generation, and not being deleted. With spec.wait, Ready means
// healthy.
func (vr *VidraResource) IsReady() bool {
	if vr == nil || vr.DeletionTimestamp != nil {
		return false
	}
	c := meta.FindStatusCondition(vr.Status.Conditions, ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == vr.Generation
}

// Readiness says briefly where a resource that is not Ready stands: the
// reason of its Ready condition, or why it has none that counts.
func (vr *VidraResource) Readiness() string {
	if vr.DeletionTimestamp != nil {
		return "being deleted"
	}
	c := meta.FindStatusCondition(vr.Status.Conditions, ConditionReady)
	switch {
	case c == nil:
		return "not reconciled yet"
	case c.ObservedGeneration != vr.Generation:
		return "its latest change is not reconciled yet"
	}
	return c.Reason
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// objectPolicy is what the per-object annotations of a manifest object ask
// for. The manifest parser has already refused unknown values.
type objectPolicy struct {
	// createOnly: apply IfNotPresent, created when missing and never
	// changed afterwards.
	createOnly bool
	// ignored: apply Ignore, never applied, pruned or deleted.
	ignored bool
	// force: recreate the object on an immutable-field change.
	force bool
}

func policyOf(obj *unstructured.Unstructured) objectPolicy {
	a := obj.GetAnnotations()
	return objectPolicy{
		createOnly: a[v1alpha1.ApplyPolicyAnnotation] == "IfNotPresent",
		ignored:    a[v1alpha1.ApplyPolicyAnnotation] == "Ignore",
		force:      a[v1alpha1.ForcePolicyAnnotation] == "enabled",
	}
}

// pruneDisabled reports an object that asks, through the annotation it
// carries, to be kept when it leaves the manifest or its resource is
// deleted. The annotation stays on the applied object, so the policy holds
// after the manifest no longer says it. Whoever can annotate the object can
// also delete it or strip Vidra's marks, so honouring it grants nothing.
func pruneDisabled(live metav1.Object) bool {
	return live.GetAnnotations()[v1alpha1.PrunePolicyAnnotation] == "disabled"
}

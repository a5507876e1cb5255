// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"bytes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// A ConfigMap or Secret made immutable can never be changed again, only
// deleted. Whoever may patch one object Vidra manages could otherwise
// freeze it: every later change of its data fails, and the object stays as
// that writer left it. So `immutable: true` set by anyone but Vidra, on an
// object whose manifest does not ask it, is drift: under the resource's
// force policy (spec.force, or the object's force annotation) the object is
// recreated from the manifest; without it the object fails with
// ImmutableSet, naming the field manager that set the flag; under
// driftPolicy Report it is listed as drift (see decideImmutable).

// immutablePath is the field of ConfigMaps and Secrets that freezes them.
var immutablePath = fieldpath.MakePathOrDie("immutable")

// immutableDrift reports whether live, a core ConfigMap or Secret, is
// immutable while desired, its manifest's object, does not ask it.
func immutableDrift(desired, live *unstructured.Unstructured) bool {
	gvk := desired.GroupVersionKind()
	if gvk.Group != "" || (gvk.Kind != "ConfigMap" && gvk.Kind != "Secret") || live == nil {
		return false
	}
	frozen, _, _ := unstructured.NestedBool(live.Object, "immutable")
	asked, _, _ := unstructured.NestedBool(desired.Object, "immutable")
	return frozen && !asked
}

// immutableManager returns the field manager that owns the immutable field
// in managedFields, and whether one does.
func immutableManager(managedFields []metav1.ManagedFieldsEntry) (string, bool) {
	for _, e := range managedFields {
		if e.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			continue
		}
		if set.Has(immutablePath) {
			return e.Manager, true
		}
	}
	return "", false
}

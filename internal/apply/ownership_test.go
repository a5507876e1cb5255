// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func TestAppliedByVidraCountsOnlyItsApplies(t *testing.T) {
	apply, update := metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"Vidra's apply", []metav1.ManagedFieldsEntry{{Manager: "vidra", Operation: apply}}, true},
		{"an update under Vidra's name", []metav1.ManagedFieldsEntry{{Manager: "vidra", Operation: update}}, false},
		{"released: Vidra's other writers only", []metav1.ManagedFieldsEntry{{Manager: v1alpha1.ReleaseFieldManager, Operation: update}, {Manager: v1alpha1.HandoverFieldManager, Operation: update}}, false},
		{"someone else's apply", []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: apply}}, false},
		{"none", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AppliedByVidra(tc.entries); got != tc.want {
				t.Fatalf("AppliedByVidra = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHoldsOthers(t *testing.T) {
	for _, tc := range []struct {
		key  ObjectKey
		want bool
	}{
		{ObjectKey{kind: "Namespace", name: "a"}, true},
		{ObjectKey{group: "apiextensions.k8s.io", kind: "CustomResourceDefinition", name: "a"}, true},
		{ObjectKey{kind: "ConfigMap", namespace: "a", name: "a"}, false},
		{ObjectKey{group: "example.com", kind: "Namespace", name: "a"}, false},
	} {
		if got := holdsOthers(tc.key); got != tc.want {
			t.Errorf("holdsOthers(%s) = %v, want %v", tc.key, got, tc.want)
		}
	}
}

func TestIsReplacedTellsAGoneUIDFromAnImmutableField(t *testing.T) {
	gk := schema.GroupKind{Kind: "ConfigMap"}
	uidChanged := apierrors.NewInvalid(gk, "a", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "x", "field is immutable")})
	dataImmutable := apierrors.NewInvalid(gk, "a", field.ErrorList{field.Invalid(field.NewPath("data"), "x", "field is immutable")})
	gone := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "a", errors.New("uid mismatch"))
	for _, tc := range []struct {
		name                string
		err                 error
		replaced, immutable bool
	}{
		{"replaced by another object", uidChanged, true, false},
		{"deleted", gone, true, false},
		{"an immutable field of the manifest", dataImmutable, false, true},
		{"anything else", errors.New("boom"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := isReplaced(tc.err); got != tc.replaced {
				t.Errorf("isReplaced = %v, want %v", got, tc.replaced)
			}
			if got := isImmutable(tc.err); got != tc.immutable {
				t.Errorf("isImmutable = %v, want %v", got, tc.immutable)
			}
		})
	}
}

// An owned-by annotation that cannot name a VidraResource names none: a
// lookup of it would be a request for another path, or fail for good and
// be retried for ever.
func TestOwnerKeyNamesOnlyWhatCouldBeAVidraResource(t *testing.T) {
	for annotation, want := range map[string]bool{
		"team-a/app":                         true,
		"team-a/app.v2":                      true,
		"":                                   false,
		"team-a":                             false,
		"/app":                               false,
		"team-a/":                            false,
		"team-a/a/b":                         false,
		"team-a/..":                          false,
		"Team-A/app":                         false,
		"team-a/app\n\u202ex":                false,
		"team-a/" + strings.Repeat("x", 254): false,
	} {
		if _, ok := ownerKey(annotation); ok != want {
			t.Errorf("ownerKey(%.40q) ok = %v, want %v", annotation, ok, want)
		}
	}
}

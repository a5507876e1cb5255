// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// adoptOrphans is a resource that adopts orphans.
func adoptOrphans(vr *v1alpha1.VidraResource) { vr.Spec.AdoptOrphans = true }

// adoptionOutcome runs one pass of heir and tells whether it wrote
// ConfigMap app, and its first failure (nil when none).
func adoptionOutcome(t *testing.T, f *engineFixture, heir *v1alpha1.VidraResource) (applied bool, failure *ObjectError) {
	t.Helper()
	pass := f.apply(heir)
	for _, a := range f.requests() {
		applied = applied || strings.HasPrefix(a, "apply configmaps")
	}
	if applied != (len(pass.Out.Inventory) == 1) {
		t.Errorf("applied %v but inventory %v", applied, pass.Out.Inventory)
	}
	if len(pass.Out.Errs) > 0 {
		failure = pass.Out.Errs[0]
	}
	return applied, failure
}

// The owner of an object is the VidraResource of its owner-uid label. The
// owned-by annotation only names it, and anyone who may patch the object
// may rewrite it: one that names no resource, or another, must not make a
// live owner's object look left behind to a resource that adopts orphans.
func TestALiveOwnersObjectIsNotAdoptedWhateverItsAnnotationSays(t *testing.T) {
	for _, annotation := range []string{"not a name", engineNS + "/nonexistent", engineNS + "/bystander"} {
		t.Run(annotation, func(t *testing.T) {
			owner := engineVR("owner", appManifest)
			bystander := engineVR("bystander", otherManifest)
			heir := engineVR("heir", appManifest, adoptOrphans)
			live := appObject(owner)
			live.SetAnnotations(map[string]string{v1alpha1.OwnedByAnnotation: annotation})
			f := newEngineFixture(t, []*v1alpha1.VidraResource{owner, bystander, heir}, live)
			applied, failure := adoptionOutcome(t, f, heir)
			if applied {
				t.Errorf("the object of a live owner was adopted; requests %v", f.requests())
			}
			if failure == nil || failure.Reason != v1alpha1.ReasonOwnedByOther || !failure.Conflict {
				t.Errorf("failure %v, want a conflict %s", failure, v1alpha1.ReasonOwnedByOther)
			}
		})
	}
}

// An operator that sees some VidraResources only (--watch-namespace,
// --shard-selector) cannot tell an owner it does not see from one that is
// gone: it adopts nothing, and says why.
func TestAnOperatorThatSeesSomeResourcesAdoptsNothing(t *testing.T) {
	gone := engineVR("gone", appManifest)
	heir := engineVR("heir", appManifest, adoptOrphans)
	f := newEngineFixture(t, []*v1alpha1.VidraResource{heir}, appObject(gone))
	f.partialView = true
	applied, failure := adoptionOutcome(t, f, heir)
	if applied {
		t.Errorf("adopted with a partial view; requests %v", f.requests())
	}
	if failure == nil || failure.Reason != v1alpha1.ReasonUnmanagedExists || !strings.Contains(failure.Error(), "cannot find") {
		t.Errorf("failure %v, want %s saying the owner cannot be found", failure, v1alpha1.ReasonUnmanagedExists)
	}
}

// Adoption reads the object afresh before taking it: marks that changed
// since the cache's copy (another resource adopted it first, its owner was
// renamed in the annotation, it was handed over) make the pass fail, to be
// retried, rather than write over them.
func TestAdoptionRereadsTheObjectBeforeTakingIt(t *testing.T) {
	gone := engineVR("gone", appManifest)
	other := engineVR("other", appManifest)
	for _, tc := range []struct {
		name   string
		change func(u *unstructured.Unstructured)
	}{
		{"owner-uid changed", func(u *unstructured.Unstructured) {
			labels := u.GetLabels()
			labels[v1alpha1.OwnerUIDLabel] = string(other.UID)
			u.SetLabels(labels)
		}},
		{"owned-by changed", func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{v1alpha1.OwnedByAnnotation: engineNS + "/renamed"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			heir := engineVR("heir", appManifest, adoptOrphans)
			f := newEngineFixture(t, []*v1alpha1.VidraResource{heir}, appObject(gone))
			gets := 0
			f.dynamic.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				gets++
				if gets == 1 {
					return false, nil, nil
				}
				u := appObject(gone)
				tc.change(u)
				return true, u, nil
			})
			pass := f.apply(heir)
			if !pass.Out.Retryable() {
				t.Errorf("errors %v; want a failure to retry", pass.Out.Errs)
			}
			if gets < 2 {
				t.Fatalf("the object was read %d times; the test expects the adoption's fresh read", gets)
			}
			for _, a := range f.requests() {
				if strings.HasPrefix(a, "apply configmaps") {
					t.Errorf("adopted an object whose marks changed since they were read; requests %v", f.requests())
				}
			}
		})
	}
}

// The apply that adopts is made at the version whose marks were read: of
// two resources adopting one object at once, the second's apply fails
// rather than write over the marks of the first.
func TestAnAdoptionAppliesAtTheVersionItRead(t *testing.T) {
	gone := engineVR("gone", appManifest)
	heir := engineVR("heir", appManifest, adoptOrphans)
	f := newEngineFixture(t, []*v1alpha1.VidraResource{heir}, appObject(gone))
	gets := 0
	f.dynamic.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		u := appObject(gone)
		if gets > 1 {
			u.SetResourceVersion("43")
		}
		return true, u, nil
	})
	var sentVersion string
	// An apply to an object that exists goes through the metadata client.
	f.meta.PrependReactor("patch", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(a.(k8stesting.PatchAction).GetPatch()); err != nil {
			return true, nil, err
		}
		sentVersion = u.GetResourceVersion()
		return false, nil, nil
	})
	if applied, _ := adoptionOutcome(t, f, heir); !applied {
		t.Fatalf("the orphan was not adopted; requests %v", f.requests())
	}
	if sentVersion != "43" {
		t.Errorf("the adopting apply was sent at resourceVersion %q, want the version the adoption read (43)", sentVersion)
	}
}

// A resource that does not adopt orphans decides on what it read already,
// and on the informer's word that the owner is gone: a tenant declaring
// many leftovers costs no further request per leftover at every retry.
func TestAResourceThatDoesNotAdoptReadsALeftoverOnce(t *testing.T) {
	gone := engineVR("gone", appManifest)
	heir := engineVR("heir", appManifest)
	f := newEngineFixture(t, []*v1alpha1.VidraResource{heir}, appObject(gone))
	if applied, _ := adoptionOutcome(t, f, heir); applied {
		t.Fatalf("adopted without spec.adoptOrphans; requests %v", f.requests())
	}
	gets := 0
	for _, a := range f.requests() {
		if strings.HasPrefix(a, "get configmaps") {
			gets++
		}
		if strings.HasPrefix(a, "get vidraresources") {
			t.Errorf("the gone owner was asked for: %q; the informer's word is enough when nothing is adopted", a)
		}
	}
	if gets != 1 {
		t.Errorf("the leftover was read %d times, want once; requests %v", gets, f.requests())
	}
}

// The informer may not hold a resource created a moment ago, whose objects
// another replica already applied: before it adopts, a resource asks the
// API server for the owner the annotation names.
func TestAdoptionAsksTheAPIServerForAnOwnerTheCacheLacks(t *testing.T) {
	owner := engineVR("owner", appManifest)
	heir := engineVR("heir", appManifest, adoptOrphans)
	f := newEngineFixture(t, []*v1alpha1.VidraResource{heir}, appObject(owner))
	if err := f.vidra.Tracker().Add(owner); err != nil {
		t.Fatal(err)
	}
	applied, failure := adoptionOutcome(t, f, heir)
	if applied {
		t.Errorf("adopted the object of an owner the API server has; requests %v", f.requests())
	}
	if failure == nil || failure.Reason != v1alpha1.ReasonOwnedByOther {
		t.Errorf("failure %v, want %s", failure, v1alpha1.ReasonOwnedByOther)
	}
}

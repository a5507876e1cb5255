// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// adoptionOutcome runs one reconcile of heir and tells whether it wrote
// ConfigMap app, and its Conflict condition.
func adoptionOutcome(t *testing.T, f *fixture, heir *v1alpha1.VidraResource) (applied bool, conflict *metav1.Condition) {
	t.Helper()
	f.run(cache.MetaObjectToName(heir))
	for _, a := range f.actions {
		applied = applied || strings.HasPrefix(a, "apply configmaps")
	}
	if len(f.statuses) == 0 {
		t.Fatalf("no status written; requests %v", f.actions)
	}
	st := f.statuses[len(f.statuses)-1]
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionConflict)
	if applied != (len(st.ManagedResources) == 1) {
		t.Errorf("applied %v but inventory %v", applied, st.ManagedResources)
	}
	return applied, c
}

// The owner of an object is the VidraResource of its owner-uid label. The
// owned-by annotation only names it, and anyone who may patch the object
// may rewrite it: one that names no resource, or another, must not make a
// live owner's object look left behind to a resource that adopts orphans.
func TestALiveOwnersObjectIsNotAdoptedWhateverItsAnnotationSays(t *testing.T) {
	for _, annotation := range []string{"not a name", operatorNS + "/nonexistent", operatorNS + "/bystander"} {
		t.Run(annotation, func(t *testing.T) {
			owner := newVR(operatorNS, "owner", configMapManifest)
			bystander := newVR(operatorNS, "bystander", otherManifest)
			heir := newVR(operatorNS, "heir", configMapManifest, func(vr *v1alpha1.VidraResource) { vr.Spec.AdoptOrphans = true })
			live := liveApp(operatorNS, owner)
			live.SetAnnotations(map[string]string{v1alpha1.OwnedByAnnotation: annotation})
			f := newFixture(t, []*v1alpha1.VidraResource{owner, bystander, heir}, live)
			applied, c := adoptionOutcome(t, f, heir)
			if applied {
				t.Errorf("the object of a live owner was adopted; requests %v, Events %q", f.actions, f.events())
			}
			if c == nil || c.Reason != v1alpha1.ReasonOwnedByOther {
				t.Errorf("Conflict condition %+v, want %s", c, v1alpha1.ReasonOwnedByOther)
			}
		})
	}
}

// An operator that sees some VidraResources only (--watch-namespace,
// --shard-selector) cannot tell an owner it does not see from one that is
// gone: it adopts nothing, and says why.
func TestAnOperatorThatSeesSomeResourcesAdoptsNothing(t *testing.T) {
	gone := newVR(operatorNS, "gone", configMapManifest)
	heir := newVR(operatorNS, "heir", configMapManifest, func(vr *v1alpha1.VidraResource) { vr.Spec.AdoptOrphans = true })
	f := newFixture(t, []*v1alpha1.VidraResource{heir}, liveApp(operatorNS, gone))
	f.partialView = true
	applied, c := adoptionOutcome(t, f, heir)
	if applied {
		t.Errorf("adopted with a partial view; requests %v", f.actions)
	}
	if c == nil || c.Reason != v1alpha1.ReasonUnmanagedExists || !strings.Contains(c.Message, "cannot find") {
		t.Errorf("Conflict condition %+v, want %s saying the owner cannot be found", c, v1alpha1.ReasonUnmanagedExists)
	}
}

// Adoption reads the object afresh before taking it: marks that changed
// since the cache's copy (another resource adopted it first, its owner was
// renamed in the annotation, it was handed over) make the reconcile try
// again rather than write over them.
func TestAdoptionRereadsTheObjectBeforeTakingIt(t *testing.T) {
	gone := newVR(operatorNS, "gone", configMapManifest)
	other := newVR(operatorNS, "other", configMapManifest)
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
			u.SetAnnotations(map[string]string{v1alpha1.OwnedByAnnotation: operatorNS + "/renamed"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			heir := newVR(operatorNS, "heir", configMapManifest, func(vr *v1alpha1.VidraResource) { vr.Spec.AdoptOrphans = true })
			f := newFixture(t, []*v1alpha1.VidraResource{heir}, liveApp(operatorNS, gone))
			gets := 0
			f.dynamic.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
				gets++
				if gets == 1 {
					return false, nil, nil
				}
				u := liveApp(operatorNS, gone)
				tc.change(u)
				return true, u, nil
			})
			if _, err := f.run(cache.MetaObjectToName(heir)); err == nil {
				t.Errorf("the reconcile succeeded; want an error to retry")
			}
			if gets < 2 {
				t.Fatalf("the object was read %d times; the test expects the adoption's fresh read", gets)
			}
			for _, a := range f.actions {
				if strings.HasPrefix(a, "apply configmaps") {
					t.Errorf("adopted an object whose marks changed since they were read; requests %v", f.actions)
				}
			}
		})
	}
}

// The apply that adopts is made at the version whose marks were read: of
// two resources adopting one object at once, the second's apply fails
// rather than write over the marks of the first.
func TestAnAdoptionAppliesAtTheVersionItRead(t *testing.T) {
	gone := newVR(operatorNS, "gone", configMapManifest)
	heir := newVR(operatorNS, "heir", configMapManifest, func(vr *v1alpha1.VidraResource) { vr.Spec.AdoptOrphans = true })
	f := newFixture(t, []*v1alpha1.VidraResource{heir}, liveApp(operatorNS, gone))
	gets := 0
	f.dynamic.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		u := liveApp(operatorNS, gone)
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
		t.Fatalf("the orphan was not adopted; requests %v", f.actions)
	}
	if sentVersion != "43" {
		t.Errorf("the adopting apply was sent at resourceVersion %q, want the version the adoption read (43)", sentVersion)
	}
}

// A resource that does not adopt orphans decides on what it read already,
// and on the informer's word that the owner is gone: a tenant declaring
// many leftovers costs no further request per leftover at every retry.
func TestAResourceThatDoesNotAdoptReadsALeftoverOnce(t *testing.T) {
	gone := newVR(operatorNS, "gone", configMapManifest)
	heir := newVR(operatorNS, "heir", configMapManifest)
	f := newFixture(t, []*v1alpha1.VidraResource{heir}, liveApp(operatorNS, gone))
	if applied, _ := adoptionOutcome(t, f, heir); applied {
		t.Fatalf("adopted without spec.adoptOrphans; requests %v", f.actions)
	}
	gets := 0
	for _, a := range f.actions {
		if strings.HasPrefix(a, "get configmaps") {
			gets++
		}
		if strings.HasPrefix(a, "get vidraresources") {
			t.Errorf("the gone owner was asked for: %q; the informer's word is enough when nothing is adopted", a)
		}
	}
	if gets != 1 {
		t.Errorf("the leftover was read %d times, want once; requests %v", gets, f.actions)
	}
}

// The informer may not hold a resource created a moment ago, whose objects
// another replica already applied: before it adopts, a resource asks the
// API server for the owner the annotation names.
func TestAdoptionAsksTheAPIServerForAnOwnerTheCacheLacks(t *testing.T) {
	owner := newVR(operatorNS, "owner", configMapManifest)
	heir := newVR(operatorNS, "heir", configMapManifest, func(vr *v1alpha1.VidraResource) { vr.Spec.AdoptOrphans = true })
	f := newFixture(t, []*v1alpha1.VidraResource{heir}, liveApp(operatorNS, owner))
	if err := f.vidra.Tracker().Add(owner); err != nil {
		t.Fatal(err)
	}
	applied, c := adoptionOutcome(t, f, heir)
	if applied {
		t.Errorf("adopted the object of an owner the API server has; requests %v", f.actions)
	}
	if c == nil || c.Reason != v1alpha1.ReasonOwnedByOther {
		t.Errorf("Conflict condition %+v, want %s", c, v1alpha1.ReasonOwnedByOther)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"slices"
	"strings"
	"testing"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// An object Vidra applied for a resource that is gone (deleted while its
// finalizer could not run) is adopted by a resource that declares it only
// when that resource opts in: its marks and its vidra Apply entry are
// anyone's to write who may create the object, so by default it is
// reported, not taken, and the message says how to take it.
func TestAnOrphanIsAdoptedOnlyByAResourceThatOptsIn(t *testing.T) {
	gone := engineVR("gone", appManifest)
	for _, tc := range []struct {
		name  string
		adopt bool
	}{{"by default", false}, {"with spec.adoptOrphans", true}} {
		t.Run(tc.name, func(t *testing.T) {
			heir := engineVR("heir", appManifest, func(vr *v1alpha1.VidraResource) { vr.Spec.AdoptOrphans = tc.adopt })
			f := newEngineFixture(t, []*v1alpha1.VidraResource{heir}, appObject(gone))
			applied, failure := adoptionOutcome(t, f, heir)
			if !tc.adopt {
				if failure == nil || failure.Reason != v1alpha1.ReasonUnmanagedExists || !strings.Contains(failure.Error(), "spec.adoptOrphans") ||
					!strings.Contains(failure.Error(), engineNS+"/gone") {
					t.Errorf("failure %v, want %s naming the gone owner and spec.adoptOrphans", failure, v1alpha1.ReasonUnmanagedExists)
				}
				if applied {
					t.Errorf("the orphan was taken without opting in: requests %v", f.requests())
				}
				return
			}
			if failure != nil {
				t.Errorf("failure %v, want none: the resource adopts orphans", failure)
			}
			if !applied {
				t.Errorf("the orphan was not adopted: requests %v", f.requests())
			}
			// The resource's readers are told what it took, and from whom.
			want := "Normal Adopted Adopted ConfigMap " + engineNS + "/app, left by VidraResource " + engineNS + "/gone (UID gone-uid)"
			if events := f.events(); !slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, want) }) {
				t.Errorf("Events %q, want one starting %q", events, want)
			}
		})
	}
}

// The owned-by annotation is anyone's to write who may write the object,
// and the conflict message quotes it: a newline, a bidirectional override
// or a quarter of a megabyte of it reach the condition and the Event as one
// bounded, readable line.
func TestAHostileOwnerAnnotationIsQuotedBoundedAndReadable(t *testing.T) {
	vr := engineVR("app", appManifest)
	live := appObject(engineVR("gone", appManifest))
	live.SetAnnotations(map[string]string{v1alpha1.OwnedByAnnotation: engineNS + "/gone\n\u202eevil" + strings.Repeat("x", 256<<10)})
	f := newEngineFixture(t, []*v1alpha1.VidraResource{vr}, live)
	_, failure := adoptionOutcome(t, f, vr)
	if failure == nil || failure.Reason != v1alpha1.ReasonUnmanagedExists {
		t.Fatalf("failure %v, want %s", failure, v1alpha1.ReasonUnmanagedExists)
	}
	if msg := failure.Error(); strings.ContainsAny(msg, "\n\u202e") || strings.Count(msg, "x") > 1024 {
		t.Errorf("the message quotes the annotation raw or whole (%d bytes): %.200q", len(msg), msg)
	}
}

// apply: IfNotPresent never writes an object that exists, so a leftover it
// names cannot take this resource's marks: it is not adopted, and the
// message says why, rather than the object being recorded as this
// resource's while it stays marked as the gone one's.
func TestAnOrphanThatIsOnlyCreatedIfAbsentIsNotAdopted(t *testing.T) {
	manifest := strings.Replace(appManifest, "metadata:\n", "metadata:\n  annotations:\n    "+v1alpha1.ApplyPolicyAnnotation+": IfNotPresent\n", 1)
	heir := engineVR("heir", manifest, adoptOrphans)
	f := newEngineFixture(t, []*v1alpha1.VidraResource{heir}, appObject(engineVR("gone", appManifest)))
	applied, failure := adoptionOutcome(t, f, heir)
	if failure == nil || failure.Reason != v1alpha1.ReasonUnmanagedExists || !strings.Contains(failure.Error(), "IfNotPresent") {
		t.Errorf("failure %v, want %s saying IfNotPresent keeps it from being adopted", failure, v1alpha1.ReasonUnmanagedExists)
	}
	if applied {
		t.Errorf("the leftover was written: requests %v", f.requests())
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// otherManifest declares ConfigMap other, so that a resource holding it
// and app in its inventory prunes app.
const otherManifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\ndata:\n  key: value\n"

// byHand is the managedFields entry of an object someone created by hand.
var byHand = metav1.ManagedFieldsEntry{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
	Time: &metav1.Time{Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}}

// An object someone else made in the place of one Vidra applied, from a
// copy that kept its marks (a backup restored, kubectl get -o yaml edited
// and created again), is not Vidra's: the resource's UID is no secret. A
// resource that declares it reports it as an object Vidra does not own,
// and does not write it or record it (which would have it deleted with the
// resource).
func TestAnObjectCarryingCopiedMarksIsNotTakenForVidras(t *testing.T) {
	owner := engineVR("owner", appManifest)
	copied := appObject(owner)
	copied.SetUID("someone-elses")
	copied.SetManagedFields([]metav1.ManagedFieldsEntry{byHand})
	f := newEngineFixture(t, []*v1alpha1.VidraResource{owner}, copied)
	pass := f.apply(owner)
	if len(pass.Out.Errs) != 1 || pass.Out.Errs[0].Reason != v1alpha1.ReasonUnmanagedExists {
		t.Errorf("errors %v, want one %s", pass.Out.Errs, v1alpha1.ReasonUnmanagedExists)
	}
	if len(pass.Out.Inventory) != 0 {
		t.Errorf("inventory %v, want empty: the copy is not this resource's", pass.Out.Inventory)
	}
	for _, a := range f.requests() {
		if verb, _, _ := strings.Cut(a, " "); verb != "get" {
			t.Errorf("request %q sent, want reads only: the object is not Vidra's", a)
		}
	}
}

// The same copy, made while the object was in the inventory, is left alone
// when the object leaves the manifest: the prune deletes only objects Vidra
// applied.
func TestPruneLeavesACopyOfAnObjectItApplied(t *testing.T) {
	owner := engineVR("owner", otherManifest, inSyncStatus)
	f := newEngineFixture(t, []*v1alpha1.VidraResource{owner})
	u := appObject(owner)
	copied := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: engineNS, Name: "app", UID: k8stypes.UID("someone-elses"), ResourceVersion: "77",
			Labels: u.GetLabels(), Annotations: u.GetAnnotations(), ManagedFields: []metav1.ManagedFieldsEntry{byHand}}}
	if err := f.meta.Tracker().Add(copied); err != nil {
		t.Fatal(err)
	}
	pass := f.apply(owner)
	if _, err := f.meta.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, engineNS, "app"); err != nil {
		t.Fatalf("the prune deleted an object Vidra never applied: %v (requests %v)", err, f.requests())
	}
	if len(pass.Out.Pruned) != 0 {
		t.Errorf("pruned %v, want nothing", pass.Out.Pruned)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

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

// appMetadata is ConfigMap app as the metadata client reads it: the marks
// of owner at resourceVersion rv, written by Vidra's apply.
func appMetadata(owner *v1alpha1.VidraResource, rv string) *metav1.PartialObjectMetadata {
	u := appObject(owner)
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: engineNS, Name: "app", UID: u.GetUID(), ResourceVersion: rv,
			Labels: u.GetLabels(), Annotations: u.GetAnnotations(), ManagedFields: u.GetManagedFields()}}
}

// A prune deletes only the version whose marks it read: an object handed
// over to another resource between the prune's read and its delete (by a
// concurrent reconcile, two replicas during a slow handoff) is that
// resource's, and stays.
func TestPruneDeletesOnlyTheVersionItReadAsItsOwn(t *testing.T) {
	owner := engineVR("owner", otherManifest, inSyncStatus)
	heir := engineVR("heir", appManifest)
	f := newEngineFixture(t, []*v1alpha1.VidraResource{owner, heir})
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	tracker := f.meta.Tracker()
	if err := tracker.Add(appMetadata(owner, "42")); err != nil {
		t.Fatal(err)
	}
	// The prune's read sees owner's marks; right after it, the object is
	// handed over to heir.
	f.meta.PrependReactor("get", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := tracker.Get(configMaps, a.GetNamespace(), a.(k8stesting.GetAction).GetName())
		if err == nil {
			if err := tracker.Update(configMaps, appMetadata(heir, "43"), engineNS); err != nil {
				t.Error(err)
			}
		}
		return true, obj, err
	})
	// Deletes honour their preconditions, as the API server's do.
	f.meta.PrependReactor("delete", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		cur, err := tracker.Get(configMaps, d.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		m := cur.(*metav1.PartialObjectMetadata)
		if p := d.GetDeleteOptions().Preconditions; p != nil &&
			(p.UID != nil && *p.UID != m.UID || p.ResourceVersion != nil && *p.ResourceVersion != m.ResourceVersion) {
			return true, nil, apierrors.NewConflict(configMaps.GroupResource(), d.GetName(), nil)
		}
		return false, nil, nil
	})
	f.apply(owner)
	cur, err := tracker.Get(configMaps, engineNS, "app")
	if err != nil {
		t.Fatalf("the object handed over to heir was deleted by owner's prune: %v (requests %v)", err, f.requests())
	}
	if got := cur.(*metav1.PartialObjectMetadata).Labels[v1alpha1.OwnerUIDLabel]; got != string(heir.UID) {
		t.Errorf("owner-uid %q, want heir's %q", got, heir.UID)
	}
	// The delete that failed announced itself to the registry beforehand;
	// it is withdrawn, so that heir's own delete of the object, or anyone
	// else's, is not taken for owner's and still wakes heir. What is left
	// are the expectations of the writes made (no event answers them here,
	// the registry's informers not running).
	writes := 0
	for _, a := range f.requests() {
		if strings.HasPrefix(a, "apply configmaps ") {
			writes++
		}
	}
	if got := f.engine.registry.Stats().Expectations; got != writes {
		t.Errorf("%d expectations pending after %d writes and a failed delete, want %d: the failed delete's is kept", got, writes, writes)
	}
}

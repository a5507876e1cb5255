// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// otherManifest declares ConfigMap other, so that a resource holding it
// and app in its inventory prunes app.
const otherManifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\ndata:\n  key: value\n"

// appMetadata is ConfigMap app as the metadata client reads it: the marks
// of owner at resourceVersion rv, written by manager.
func appMetadata(owner *v1alpha1.VidraResource, uid, rv string, manager metav1.ManagedFieldsEntry) *metav1.PartialObjectMetadata {
	u := liveApp(operatorNS, owner)
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "app", UID: k8stypes.UID(uid), ResourceVersion: rv,
			Labels: u.GetLabels(), Annotations: u.GetAnnotations(), ManagedFields: []metav1.ManagedFieldsEntry{manager}}}
}

var vidraApply = metav1.ManagedFieldsEntry{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1"}

// A prune deletes only the version whose marks it read: an object handed
// over to another resource between the prune's read and its delete (by a
// concurrent reconcile, two replicas during a slow handoff) is that
// resource's, and stays.
func TestPruneDeletesOnlyTheVersionItReadAsItsOwn(t *testing.T) {
	owner := newVR(operatorNS, "owner", otherManifest, reportedInSync)
	heir := newVR(operatorNS, "heir", configMapManifest)
	f := newFixture(t, []*v1alpha1.VidraResource{owner, heir})
	tracker := f.meta.Tracker()
	if err := tracker.Add(appMetadata(owner, "app-uid", "42", vidraApply)); err != nil {
		t.Fatal(err)
	}
	// The prune's read sees owner's marks; right after it, the object is
	// handed over to heir.
	f.meta.PrependReactor("get", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := tracker.Get(configMapsRef.GVR, a.GetNamespace(), a.(k8stesting.GetAction).GetName())
		if err == nil {
			if err := tracker.Update(configMapsRef.GVR, appMetadata(heir, "app-uid", "43", vidraApply), operatorNS); err != nil {
				t.Error(err)
			}
		}
		return true, obj, err
	})
	// Deletes honour their preconditions, as the API server's do.
	f.meta.PrependReactor("delete", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		cur, err := tracker.Get(configMapsRef.GVR, d.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		m := cur.(*metav1.PartialObjectMetadata)
		if p := d.GetDeleteOptions().Preconditions; p != nil &&
			(p.UID != nil && *p.UID != m.UID || p.ResourceVersion != nil && *p.ResourceVersion != m.ResourceVersion) {
			return true, nil, apierrors.NewConflict(configMapsRef.GVR.GroupResource(), d.GetName(), nil)
		}
		return false, nil, nil
	})
	f.run(cache.MetaObjectToName(owner))
	cur, err := tracker.Get(configMapsRef.GVR, operatorNS, "app")
	if err != nil {
		t.Fatalf("the object handed over to heir was deleted by owner's prune: %v (requests %v)", err, f.actions)
	}
	if got := cur.(*metav1.PartialObjectMetadata).Labels[v1alpha1.OwnerUIDLabel]; got != string(heir.UID) {
		t.Errorf("owner-uid %q, want heir's %q", got, heir.UID)
	}
	// The delete that failed announced itself to the registry beforehand;
	// it is withdrawn, so that heir's own delete of the object, or anyone
	// else's, is not taken for owner's and still wakes heir. What is left
	// are the expectations of the writes made (no event answers them here,
	// the registry's informers not running).
	f.mu.Lock()
	writes := 0
	for _, a := range f.actions {
		if strings.HasPrefix(a, "apply configmaps ") {
			writes++
		}
	}
	f.mu.Unlock()
	if got := f.c.registry.Stats().Expectations; got != writes {
		t.Errorf("%d expectations pending after %d writes and a failed delete, want %d: the failed delete's is kept", got, writes, writes)
	}
}

// An object Vidra applied for a resource that is gone (deleted while its
// finalizer could not run) is adopted by a resource that declares it only
// when that resource opts in: its marks and its vidra Apply entry are
// anyone's to write who may create the object, so by default it is
// reported, not taken, and the message says how to take it.
func TestAnOrphanIsAdoptedOnlyByAResourceThatOptsIn(t *testing.T) {
	gone := newVR(operatorNS, "gone", configMapManifest)
	for _, tc := range []struct {
		name  string
		adopt bool
	}{{"by default", false}, {"with spec.adoptOrphans", true}} {
		t.Run(tc.name, func(t *testing.T) {
			heir := newVR(operatorNS, "heir", configMapManifest, func(vr *v1alpha1.VidraResource) { vr.Spec.AdoptOrphans = tc.adopt })
			f := newFixture(t, []*v1alpha1.VidraResource{heir}, liveApp(operatorNS, gone))
			f.run(cache.MetaObjectToName(heir))
			if len(f.statuses) == 0 {
				t.Fatalf("no status written; requests %v", f.actions)
			}
			st := f.statuses[len(f.statuses)-1]
			conflict := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionConflict)
			var applied bool
			for _, a := range f.actions {
				applied = applied || strings.HasPrefix(a, "apply configmaps")
			}
			if !tc.adopt {
				if conflict == nil || conflict.Reason != v1alpha1.ReasonUnmanagedExists || !strings.Contains(conflict.Message, "spec.adoptOrphans") ||
					!strings.Contains(conflict.Message, operatorNS+"/gone") {
					t.Errorf("Conflict condition %+v, want reason %s naming the gone owner and spec.adoptOrphans", conflict, v1alpha1.ReasonUnmanagedExists)
				}
				if applied || len(st.ManagedResources) != 0 {
					t.Errorf("the orphan was taken without opting in: requests %v, inventory %v", f.actions, st.ManagedResources)
				}
				return
			}
			if conflict != nil && conflict.Status == metav1.ConditionTrue {
				t.Errorf("Conflict condition %+v, want none: the resource adopts orphans", conflict)
			}
			if !applied || len(st.ManagedResources) != 1 {
				t.Errorf("the orphan was not adopted: requests %v, inventory %v", f.actions, st.ManagedResources)
			}
			// The resource's readers are told what it took, and from whom.
			want := "Normal Adopted Adopted ConfigMap " + operatorNS + "/app, left by VidraResource " + operatorNS + "/gone (UID gone-uid)"
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
	vr := newVR(operatorNS, "app", configMapManifest)
	live := liveApp(operatorNS, newVR(operatorNS, "gone", configMapManifest))
	live.SetAnnotations(map[string]string{v1alpha1.OwnedByAnnotation: operatorNS + "/gone\n\u202eevil" + strings.Repeat("x", 256<<10)})
	f := newFixture(t, []*v1alpha1.VidraResource{vr}, live)
	f.run(cache.MetaObjectToName(vr))
	if len(f.statuses) == 0 {
		t.Fatalf("no status written; requests %v", f.actions)
	}
	c := meta.FindStatusCondition(f.statuses[len(f.statuses)-1].Conditions, v1alpha1.ConditionConflict)
	if c == nil || c.Reason != v1alpha1.ReasonUnmanagedExists {
		t.Fatalf("Conflict condition %+v, want reason %s", c, v1alpha1.ReasonUnmanagedExists)
	}
	if strings.ContainsAny(c.Message, "\n\u202e") || strings.Count(c.Message, "x") > 1024 {
		t.Errorf("the message quotes the annotation raw or whole (%d bytes): %.200q", len(c.Message), c.Message)
	}
}

// apply: IfNotPresent never writes an object that exists, so a leftover it
// names cannot take this resource's marks: it is not adopted, and the
// message says why, rather than the object being recorded as this
// resource's while it stays marked as the gone one's.
func TestAnOrphanThatIsOnlyCreatedIfAbsentIsNotAdopted(t *testing.T) {
	manifest := strings.Replace(configMapManifest, "metadata:\n", "metadata:\n  annotations:\n    "+v1alpha1.ApplyPolicyAnnotation+": IfNotPresent\n", 1)
	heir := newVR(operatorNS, "heir", manifest, func(vr *v1alpha1.VidraResource) { vr.Spec.AdoptOrphans = true })
	f := newFixture(t, []*v1alpha1.VidraResource{heir}, liveApp(operatorNS, newVR(operatorNS, "gone", configMapManifest)))
	f.run(cache.MetaObjectToName(heir))
	if len(f.statuses) == 0 {
		t.Fatalf("no status written; requests %v", f.actions)
	}
	st := f.statuses[len(f.statuses)-1]
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionConflict)
	if c == nil || c.Reason != v1alpha1.ReasonUnmanagedExists || !strings.Contains(c.Message, "IfNotPresent") {
		t.Errorf("Conflict condition %+v, want %s saying IfNotPresent keeps it from being adopted", c, v1alpha1.ReasonUnmanagedExists)
	}
	if len(st.ManagedResources) != 0 {
		t.Errorf("inventory %v, want empty", st.ManagedResources)
	}
}

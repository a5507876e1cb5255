// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// heldCRD is CRD widgets.example.com of owner, deleted at deleted and held
// by finalizers, with annotations.
func heldCRD(owner *v1alpha1.VidraResource, deleted time.Time, finalizers []string, annotations map[string]string) *metav1.PartialObjectMetadata {
	dt := metav1.NewTime(deleted)
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", UID: "crd-uid", ResourceVersion: "42", DeletionTimestamp: &dt,
			Finalizers: finalizers, Annotations: annotations,
			Labels:        map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue, v1alpha1.OwnerUIDLabel: string(owner.UID)},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply}},
		},
	}
}

func TestCRDCleanupIsRequeuedLessOftenAsItLasts(t *testing.T) {
	now := time.Date(2025, 1, 1, 1, 0, 0, 0, time.UTC)
	crd := ObjectKey{group: "apiextensions.k8s.io", kind: "CustomResourceDefinition", name: "widgets.example.com"}
	cleanup := []string{crdCleanupFinalizer}
	at := func(d time.Duration) map[string]string {
		return map[string]string{v1alpha1.CleanupRequeuedAtAnnotation: now.Add(d).Format(time.RFC3339)}
	}
	owner := engineVR("app", "")
	for _, c := range []struct {
		name        string
		key         ObjectKey
		deletedAgo  time.Duration
		finalizers  []string
		annotations map[string]string
		wait        time.Duration
		held        bool
	}{
		{"held a while, never requeued", crd, time.Minute, cleanup, nil, 0, true},
		{"just deleted: its cleanup gets its chance first", crd, 2 * time.Second, cleanup, nil, 3 * time.Second, true},
		{"held by another finalizer only", crd, time.Minute, []string{"example.com/hold"}, nil, 0, false},
		{"not a CRD", ObjectKey{kind: "Namespace", name: "widgets.example.com"}, time.Minute, cleanup, nil, 0, false},
		{"held 20 s, requeued 2 s ago", crd, 20 * time.Second, cleanup, at(-2 * time.Second), 3 * time.Second, true},
		{"held 20 s, requeued 5 s ago", crd, 20 * time.Second, cleanup, at(-5 * time.Second), 0, true},
		{"held 4 min, requeued 30 s ago: a minute apart", crd, 4 * time.Minute, cleanup, at(-30 * time.Second), 30 * time.Second, true},
		{"held an hour: five minutes apart at most", crd, time.Hour, cleanup, at(-time.Minute), 4 * time.Minute, true},
		{"a requeue time ahead, set by someone", crd, time.Minute, cleanup, at(time.Hour), 0, true},
		{"a requeue time that is not one", crd, time.Minute, cleanup, map[string]string{v1alpha1.CleanupRequeuedAtAnnotation: "soon"}, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			live := heldCRD(owner, now.Add(-c.deletedAgo), c.finalizers, c.annotations)
			if wait, held := crdCleanupWait(c.key, live, now); wait != c.wait || held != c.held {
				t.Errorf("crdCleanupWait = %v, %v; want %v, %v", wait, held, c.wait, c.held)
			}
		})
	}
}

// A deletion that finds a CRD of its own held by the API server's cleanup
// for long enough requeues that cleanup with one metadata patch, and waits
// for the CRD all the same.
func TestCleanupRequeuesTheAPIServersCleanupOfAHeldCRD(t *testing.T) {
	vr := engineVR("app", "", func(vr *v1alpha1.VidraResource) {
		vr.Status.ManagedResources = []v1alpha1.ManagedResource{{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: "widgets.example.com"}}
		vr.Status.InventoryCluster = &v1alpha1.ClusterReference{}
	})
	f := newEngineFixture(t, []*v1alpha1.VidraResource{vr})
	now := f.engine.clock.Now()
	if err := f.meta.Tracker().Add(heldCRD(vr, now.Add(-time.Minute), []string{crdCleanupFinalizer}, nil)); err != nil {
		t.Fatal(err)
	}
	var patch string
	f.meta.PrependReactor("patch", "customresourcedefinitions", func(a k8stesting.Action) (bool, runtime.Object, error) {
		patch = string(a.(k8stesting.PatchAction).GetPatch())
		return false, nil, nil
	})

	left, err := f.engine.Cleanup(context.Background(), vr, f.target, true, false)
	if err != nil || len(left.Failed) != 0 || len(left.Pending) != 1 {
		t.Fatalf("Cleanup: pending %v, failed %v, err %v; want the CRD pending", left.Pending, left.Failed, err)
	}
	if want := crdCleanupInterval(time.Minute); left.Recheck != want {
		t.Errorf("Recheck = %v, want the next requeue's %v", left.Recheck, want)
	}
	want := `{"metadata":{"annotations":{"` + v1alpha1.CleanupRequeuedAtAnnotation + `":"` + now.UTC().Format(time.RFC3339) + `"}}}`
	if patch != want {
		t.Errorf("patch sent: %s\nwant %s", patch, want)
	}
	if reqs := f.requests(); !slices.Equal(reqs, []string{"get customresourcedefinitions /widgets.example.com", "patch customresourcedefinitions /widgets.example.com"}) {
		t.Errorf("requests: %q; want a read and the requeue, no delete", reqs)
	}
}

// An identity that may not patch the CRD gets no recheck of its own: its
// deletion comes back with the work queue's backoff, not every few seconds
// for as long as the CRD is held.
func TestARefusedRequeueLeavesTheWaitToTheBackoff(t *testing.T) {
	vr := engineVR("app", "", func(vr *v1alpha1.VidraResource) {
		vr.Status.ManagedResources = []v1alpha1.ManagedResource{{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: "widgets.example.com"}}
		vr.Status.InventoryCluster = &v1alpha1.ClusterReference{}
	})
	f := newEngineFixture(t, []*v1alpha1.VidraResource{vr})
	if err := f.meta.Tracker().Add(heldCRD(vr, f.engine.clock.Now().Add(-time.Minute), []string{crdCleanupFinalizer}, nil)); err != nil {
		t.Fatal(err)
	}
	f.meta.PrependReactor("patch", "customresourcedefinitions", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, "widgets.example.com", errors.New("may not"))
	})
	left, err := f.engine.Cleanup(context.Background(), vr, f.target, true, false)
	if err != nil || len(left.Pending) != 1 || left.Recheck != 0 {
		t.Errorf("Cleanup: pending %v, recheck %v, err %v; want the CRD pending and no recheck", left.Pending, left.Recheck, err)
	}
}

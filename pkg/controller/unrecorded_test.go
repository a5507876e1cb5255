// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/shard"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// An object created by a reconcile whose status write then failed is not
// forgotten: the next reconcile, whose manifest no longer declares it,
// prunes it, although no status ever recorded it.
func TestAnObjectCreatedBeforeAFailedStatusWriteIsPrunedOnceDropped(t *testing.T) {
	extra := "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dropped\ndata:\n  key: value\n"
	vr := newVR(operatorNS, "raced", configMapManifest+extra)
	f := newFixture(t, []*v1alpha1.VidraResource{vr})
	f.statusConflict = true
	c := f.newController()
	f.c = c
	f.recordRequests()
	key := cache.MetaObjectToName(vr)
	if _, err := c.sync(context.Background(), key); !apierrors.IsConflict(err) {
		t.Fatalf("first sync: %v, want the status write's conflict", err)
	}
	f.mu.Lock()
	if len(f.statuses) != 1 || len(f.statuses[0].ManagedResources) != 2 {
		t.Fatalf("first sync wrote %+v, want one status naming both objects", f.statuses)
	}
	f.actions, f.statuses = nil, nil
	f.mu.Unlock()

	// The API server holds what the first sync applied; its status holds
	// nothing, since the write failed.
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	dropped := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "dropped", UID: "dropped-uid", ResourceVersion: appliedRV,
			Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue, v1alpha1.OwnerUIDLabel: string(vr.UID),
				v1alpha1.BucketLabel: shard.BucketLabel(key)},
			Annotations:   map[string]string{v1alpha1.OwnedByAnnotation: key.String()},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply}}},
	}
	if err := f.meta.Tracker().Create(gvr, dropped, operatorNS); err != nil {
		t.Fatal(err)
	}
	// The manifest drops the object.
	next := vr.DeepCopy()
	next.Spec.Manifest, next.Generation, next.ResourceVersion = configMapManifest, 2, "8"
	if err := c.indexer.Update(next); err != nil {
		t.Fatal(err)
	}
	if err := f.vidra.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.ResourcePlural), next, operatorNS); err != nil {
		t.Fatal(err)
	}
	f.statusConflict = false
	if _, err := c.sync(context.Background(), key); err != nil {
		t.Fatalf("second sync: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.actions, "delete configmaps vidra-system/dropped") {
		t.Errorf("requests sent:\n  %s\nwant the dropped object deleted; status %+v", strings.Join(f.actions, "\n  "), f.statuses)
	}
	if len(f.statuses) != 1 {
		t.Fatalf("%d status writes, want 1", len(f.statuses))
	}
	if got := f.statuses[0].ManagedResources; len(got) != 1 || got[0].Name != "app" {
		t.Errorf("inventory written %v, want the declared object alone", got)
	}
	if !slices.ContainsFunc(f.events(), func(e string) bool {
		return strings.HasPrefix(e, "Normal Pruned Pruned 1 object: ConfigMap vidra-system/dropped")
	}) {
		t.Error("no Pruned Event naming the dropped object")
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// keepOwned keeps the objects whose owner label names "owner": the others
// match the selector, but nobody can own them.
func keepOwned(u *unstructured.Unstructured) bool { return u.GetLabels()[ownerLabel] == "owner" }

func TestRejectedObjectsAreNotCachedNorDelivered(t *testing.T) {
	c, ns, r, rec, ref := watched(t, watchregistry.Options[string]{Keep: keepOwned})
	createConfigMap(t, c.cs, configMap(ns, "foreign", "squatter", map[string]string{"big": "payload"}))
	createConfigMap(t, c.cs, configMap(ns, "owned", "owner", nil))
	// The barrier: the later, owned object's add is delivered, so the
	// foreign one before it has been handled.
	rec.waitAfter(t, 0, "the owned object's add", isEvent(watchregistry.EventAdded, "owned"))
	if n := rec.count(forObject("foreign")); n != 0 {
		t.Fatalf("%d events delivered for a rejected object:\n%s", n, rec.dump(0))
	}
	if _, err := r.Get(ref, ns, "foreign"); !errors.IsNotFound(err) {
		t.Fatalf("Get of a rejected object: %v, want NotFound", err)
	}
	list, err := r.List(ref, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].GetName() != "owned" {
		t.Fatalf("List holds %d objects, want only the owned one", len(list))
	}
	if got := r.Stats().Filtered[watchregistry.FilterRejected]; got < 1 {
		t.Fatalf("rejected events counted: %d, want at least 1", got)
	}

	// Taken over by its rightful owner, the object becomes visible and is
	// delivered as added; let go again, as deleted.
	pos := rec.mark()
	patchConfigMap(t, c.cs, ns, "foreign", `{"metadata":{"labels":{"`+ownerLabel+`":"owner"}}}`)
	rec.waitAfter(t, pos, "the now-owned object's add", isEvent(watchregistry.EventAdded, "foreign"))
	if _, err := r.Get(ref, ns, "foreign"); err != nil {
		t.Fatalf("Get of a kept object: %v", err)
	}
	pos = rec.mark()
	patchConfigMap(t, c.cs, ns, "foreign", `{"metadata":{"labels":{"`+ownerLabel+`":"squatter"}}}`)
	rec.waitAfter(t, pos, "the rejected object's delete", isEvent(watchregistry.EventDeleted, "foreign"))
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// What wakes a resource: any event until a pass of it said where its
// objects are watched; after that, only the objects of its manifest, on
// that cluster. A resource re-created under the same name starts over.
func TestWakeIndexSpeaksForTheWatchedObjectsOnTheWatchedCluster(t *testing.T) {
	x := NewWakeIndex()
	key := cache.ObjectName{Namespace: "team-a", Name: "app"}
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	declared := WatchedObject{GVR: cms, Namespace: "team-a", Name: "settings"}
	other := WatchedObject{GVR: cms, Namespace: "team-a", Name: "copy"}
	check := func(step, uid, cluster string, obj WatchedObject, want bool) {
		t.Helper()
		if got := x.WakesFrom(key, types.UID(uid), cluster, obj); got != want {
			t.Errorf("%s: WakesFrom(%s, %q, %v) = %v, want %v", step, uid, cluster, obj, got, want)
		}
	}
	check("never reconciled", "u1", "", other, true)
	x.expect(key, "u1", "", []WatchedObject{declared})
	check("objects expected, cluster not known yet", "u1", "east", other, true)
	x.watching(key, "u1", "")
	check("declared, on the watched cluster", "u1", "", declared, true)
	check("not declared", "u1", "", other, false)
	check("another cluster", "u1", "east", declared, false)
	check("a resource re-created under the name", "u2", "", other, true)
	x.expect(key, "u2", "", nil)
	x.watching(key, "u2", "")
	check("the new resource declares nothing", "u2", "", declared, false)
	x.forget(key)
	check("forgotten", "u2", "", other, true)
}

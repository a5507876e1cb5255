// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// WakeIndex records, for each VidraResource, the cluster its last pass had
// its objects watched on and the objects of its manifest it watched: what
// watch events may speak for it (WakesFrom) and which cached objects it
// declares (Declares). The engine writes it; the watch registry's callbacks
// read it, from the informers' goroutines. It is built before both, so that
// neither has to be handed the other once built.
type WakeIndex struct {
	mu sync.Mutex
	m  map[cache.ObjectName]*watched
}

// watched is one resource's entry.
type watched struct {
	uid types.UID
	// cluster is the cluster the objects are watched on, once known.
	cluster string
	known   bool
	// objects are the manifest's objects watched, nil for every object.
	objects map[WatchedObject]bool
}

// NewWakeIndex returns an empty index.
func NewWakeIndex() *WakeIndex {
	return &WakeIndex{m: map[cache.ObjectName]*watched{}}
}

// WakesFrom reports whether an event of obj on cluster, carrying the marks
// of the VidraResource of key and uid, may wake it. A tenant's own API
// server can send objects with the marks of any resource, whose UID is no
// secret (its objects carry it): only the cluster the resource's objects
// are watched on speaks for them. On that cluster too, anyone who may
// label an object can copy the marks of a resource that placed an object
// in their namespace: only the objects of the resource's manifest wake it,
// else every edit of a copy would reconcile another tenant's resource. A
// resource not reconciled since the operator started is woken by any, and
// reconciled once anyway.
func (x *WakeIndex) WakesFrom(key cache.ObjectName, uid types.UID, cluster string, obj WatchedObject) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	w := x.m[key]
	if w == nil || w.uid != uid || !w.known {
		return true
	}
	return w.cluster == cluster && (w.objects == nil || w.objects[obj])
}

// lookup returns what the last pass of the resource of key and uid had
// watched, known false when no pass of it recorded a cluster.
func (x *WakeIndex) lookup(key cache.ObjectName, uid types.UID) (cluster string, objects map[WatchedObject]bool, known bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	w := x.m[key]
	if w == nil || w.uid != uid || !w.known {
		return "", nil, false
	}
	return w.cluster, w.objects, true
}

// expect records the objects a pass is about to have watched, before their
// informers start: their first lists wake the owners of what they find.
func (x *WakeIndex) expect(key cache.ObjectName, uid types.UID, objects map[WatchedObject]bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	w := x.entry(key, uid)
	w.objects = objects
}

// watching records the cluster the resource's objects are now watched on.
func (x *WakeIndex) watching(key cache.ObjectName, uid types.UID, cluster string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	w := x.entry(key, uid)
	w.cluster, w.known = cluster, true
}

// forget drops the resource's entry.
func (x *WakeIndex) forget(key cache.ObjectName) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.m, key)
}

// entry returns the entry of key for uid, a fresh one when it was of
// another resource of the same name. Called under mu.
func (x *WakeIndex) entry(key cache.ObjectName, uid types.UID) *watched {
	w := x.m[key]
	if w == nil || w.uid != uid {
		w = &watched{uid: uid}
		x.m[key] = w
	}
	return w
}

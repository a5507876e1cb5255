// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// WakeIndex records, for each VidraResource, the cluster its last pass had
// its objects watched on and the objects of its manifest it watched: what
// watch events may speak for it (WakesFrom) and which cached objects it
// declares (Declares). The engine writes it; the watch registry's callbacks
// read it, from the informers' goroutines. It is built before both, so that
// neither has to be handed the other once built.
//
// The objects are the resource's interests in the watch registry's sense
// (watchregistry.Interests, one by name per object): the library's own
// index of which owner wants which object, which any operator built on it
// uses. What Vidra adds is the cluster each resource is known to be
// watched on, by the resource's UID.
type WakeIndex struct {
	interests *watchregistry.Interests[cache.ObjectName]

	mu sync.Mutex
	m  map[cache.ObjectName]*watched
}

// watched is what the index knows of one resource beside its interests.
type watched struct {
	uid types.UID
	// cluster is the cluster the objects are watched on, once known.
	cluster string
	known   bool
}

// NewWakeIndex returns an empty index.
func NewWakeIndex() *WakeIndex {
	return &WakeIndex{interests: watchregistry.NewInterests[cache.ObjectName](), m: map[cache.ObjectName]*watched{}}
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
	on, known := x.cluster(key, uid)
	if !known {
		return true
	}
	return on == cluster && x.interested(key, cluster, obj.GVR, obj.Namespace, obj.Name)
}

// cluster returns the cluster the resource of key and uid is watched on,
// known false when no pass of it recorded one.
func (x *WakeIndex) cluster(key cache.ObjectName, uid types.UID) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	w := x.m[key]
	if w == nil || w.uid != uid || !w.known {
		return "", false
	}
	return w.cluster, true
}

// interested reports whether the resource of key declared the object.
func (x *WakeIndex) interested(key cache.ObjectName, cluster string, gvr schema.GroupVersionResource, namespace, name string) bool {
	return x.interests.WantsByName(key, watchregistry.Ref{Cluster: cluster, GVR: gvr}, namespace, name)
}

// expect records the objects a pass on cluster is about to have watched,
// before their informers start: their first lists wake the owners of what
// they find.
func (x *WakeIndex) expect(key cache.ObjectName, uid types.UID, cluster string, objects []WatchedObject) {
	interests := make([]watchregistry.Interest, 0, len(objects))
	for _, o := range objects {
		interests = append(interests, watchregistry.Interest{Ref: watchregistry.Ref{Cluster: cluster, GVR: o.GVR}, Namespace: o.Namespace, Name: o.Name})
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.entry(key, uid)
	// Under mu, so that a forget cannot come between the entry and its
	// interests.
	x.interests.Set(key, interests)
}

// watching records the cluster the resource's objects are now watched on.
func (x *WakeIndex) watching(key cache.ObjectName, uid types.UID, cluster string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	w := x.entry(key, uid)
	w.cluster, w.known = cluster, true
}

// forget drops the resource's entry and interests.
func (x *WakeIndex) forget(key cache.ObjectName) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.m, key)
	x.interests.Forget(key)
}

// entry returns the entry of key for uid, a fresh one, without interests,
// when it was of another resource of the same name. Called under mu.
func (x *WakeIndex) entry(key cache.ObjectName, uid types.UID) *watched {
	w := x.m[key]
	if w == nil || w.uid != uid {
		w = &watched{uid: uid}
		x.m[key] = w
		x.interests.Forget(key)
	}
	return w
}

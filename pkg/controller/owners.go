// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// resourceUIDs are the UIDs of the VidraResources the informer holds. An
// object's owner is told by the UID of its owner-uid label: its owned-by
// annotation is anyone's to rewrite who may patch the object, and naming a
// resource that does not exist would make a live owner's object look left
// behind. A set of UIDs costs a fraction of an informer index (one map
// entry a resource, where an index keeps a set per value).
type resourceUIDs struct {
	mu   sync.RWMutex
	uids map[types.UID]struct{}
}

func newResourceUIDs() *resourceUIDs {
	return &resourceUIDs{uids: map[types.UID]struct{}{}}
}

func (s *resourceUIDs) add(obj any) {
	if vr, ok := obj.(*v1alpha1.VidraResource); ok && vr.UID != "" {
		s.mu.Lock()
		s.uids[vr.UID] = struct{}{}
		s.mu.Unlock()
	}
}

func (s *resourceUIDs) update(oldObj, newObj any) {
	old, ok1 := oldObj.(*v1alpha1.VidraResource)
	cur, ok2 := newObj.(*v1alpha1.VidraResource)
	// A resource deleted and created again under its name while the watch
	// was down reaches the informer as one update.
	if ok1 && ok2 && old.UID != cur.UID {
		s.remove(old)
		s.add(cur)
	}
}

func (s *resourceUIDs) remove(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if vr, ok := obj.(*v1alpha1.VidraResource); ok {
		s.mu.Lock()
		delete(s.uids, vr.UID)
		s.mu.Unlock()
	}
}

func (s *resourceUIDs) has(uid types.UID) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.uids[uid]
	return ok
}

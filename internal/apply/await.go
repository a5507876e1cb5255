// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/destination"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// awaitGone has the deleted resource vr watch what its deletion still waits
// for, the objects of pending on target, and be woken by their events
// alone: when a finalizer of theirs lets the last one go, its delete event
// ends the wait at once (the engine withdrew the expectation of its delete,
// AwaitDelete), where the work queue's backoff would have come back up to
// minutes later. The kinds of the objects already gone are no longer
// watched for it.
func (e *Engine) awaitGone(ctx context.Context, vr *v1alpha1.VidraResource, target *destination.Target, pending []v1alpha1.ManagedResource) {
	key := cache.MetaObjectToName(vr)
	objects := make([]WatchedObject, 0, len(pending))
	seen := map[schema.GroupVersionResource]bool{}
	var refs []watchregistry.Ref
	for _, m := range pending {
		gv, err := schema.ParseGroupVersion(m.APIVersion)
		if err != nil {
			continue
		}
		mapping, err := target.Mapper.Mapping(gv.WithKind(m.Kind))
		if err != nil {
			continue
		}
		objects = append(objects, WatchedObject{GVR: mapping.Resource, Namespace: m.Namespace, Name: m.Name})
		if !seen[mapping.Resource] {
			seen[mapping.Resource] = true
			refs = append(refs, watchregistry.Ref{Cluster: target.Cluster, GVR: mapping.Resource})
		}
	}
	e.wakes.expect(key, vr.UID, target.Cluster, objects)
	if err := e.registry.Track(key, refs); err != nil {
		// The work queue's backoff still comes back.
		klog.FromContext(ctx).Error(err, "Watching the objects a deletion waits for failed; it checks again with backoff")
		return
	}
	e.wakes.watching(key, vr.UID, target.Cluster)
}

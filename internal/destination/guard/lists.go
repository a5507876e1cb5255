// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"context"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// listsOnly is the dynamic client of a remote cluster's informers. They
// list before they watch instead of streaming the list as a watch: a list
// is one answer, or pages, which the guard bounds before client-go decodes
// them, while a streamed list is held object by object until the server
// says it is complete, and a server of the tenant's need never say so. And
// the informers of one namespace's clusters list one at a time, decoding
// included: a list is bounded, but a tenant chooses how many kinds its
// clusters list.
type listsOnly struct {
	dynamic.Interface
	slot *listSlot
}

// IsWatchListSemanticsUnSupported tells client-go's reflectors to list.
func (listsOnly) IsWatchListSemanticsUnSupported() bool { return true }

func (c listsOnly) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	all := c.Interface.Resource(gvr)
	return slotNamespaceable{slotResource{all, c.slot}, all}
}

type slotNamespaceable struct {
	slotResource
	all dynamic.NamespaceableResourceInterface
}

func (r slotNamespaceable) Namespace(ns string) dynamic.ResourceInterface {
	return slotResource{r.all.Namespace(ns), r.slotResource.slot}
}

type slotResource struct {
	dynamic.ResourceInterface
	slot *listSlot
}

// listSlot lets one list of a namespace's informers be read at a time.
type listSlot struct {
	held chan struct{}
	// waiting counts the lists waiting for the slot.
	waiting atomic.Int32
}

// List holds the namespace's slot while the list is read and decoded; the
// clusters of the operator's own namespace have none.
func (r slotResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if r.slot == nil {
		return r.ResourceInterface.List(ctx, opts)
	}
	select {
	case r.slot.held <- struct{}{}:
	default:
		r.slot.waiting.Add(1)
		select {
		case r.slot.held <- struct{}{}:
			r.slot.waiting.Add(-1)
		case <-ctx.Done():
			r.slot.waiting.Add(-1)
			return nil, ctx.Err()
		}
	}
	defer func() { <-r.slot.held }()
	return r.ResourceInterface.List(ctx, opts)
}

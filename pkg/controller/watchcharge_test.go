// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// A resource keeps its watches while a pass applies: the look before the
// applies (the kinds its inventory holds) only adds to what it tracks. A
// pass that started from a copy without the inventory (the informer not yet
// delivering the status just written) used to drop every ref until its end,
// freeing the resource's share of its namespace's informer budget for as
// long as the applies took: another resource of the namespace took it, and
// this one was refused its own kinds at the end of the pass.
func TestAPassKeepsItsWatchesWhileItApplies(t *testing.T) {
	key := cache.ObjectName{Namespace: operatorNS, Name: "app"}
	// No inventory in status: the copy before the last status write.
	f := newFixture(t, []*v1alpha1.VidraResource{newVR(key.Namespace, key.Name, configMapManifest)})
	f.watching = true
	var mu sync.Mutex
	var during [][]watchregistry.Ref
	seeRefs := func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		during = append(during, f.c.registry.Refs(key))
		return false, nil, nil
	}
	// Applies go through the metadata client, or the dynamic one where
	// the whole answer is needed.
	f.meta.PrependReactor("patch", "configmaps", seeRefs)
	f.dynamic.PrependReactor("patch", "configmaps", seeRefs)
	if _, err := f.run(key); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(during) == 0 {
		t.Fatalf("the pass applied nothing: %v", f.actions)
	}
	for i, refs := range during {
		if !slices.Contains(refs, configMapsRef) {
			t.Errorf("apply %d: the resource tracked %v, want %v kept", i, refs, configMapsRef)
		}
	}
	if refs := f.c.registry.Refs(key); !slices.Equal(refs, []watchregistry.Ref{configMapsRef}) {
		t.Errorf("after the pass the resource tracks %v, want %v", refs, configMapsRef)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// The Mapper keeps the mappings it found until a refresh, and a refresh
// forgets them: a kind no longer served is then no match.
func TestMapperKeepsMappingsUntilARefresh(t *testing.T) {
	disco := k8sfake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	widgets := metav1.APIResourceList{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
		{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: metav1.Verbs{"get", "list"}},
	}}
	core := metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: metav1.Verbs{"get", "list"}},
	}}
	disco.Resources = []*metav1.APIResourceList{&core, &widgets}
	m := newMapper(disco, clocktesting.NewFakeClock(time.Now()))
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

	first, err := m.Mapping(gvk)
	if err != nil || first.Resource.Resource != "widgets" {
		t.Fatalf("Mapping: %v, %v", first, err)
	}
	disco.Resources = []*metav1.APIResourceList{&core} // the CRD is deleted
	if again, err := m.Mapping(gvk); err != nil || again != first {
		t.Fatalf("Mapping before a refresh: %v, %v; want the mapping found", again, err)
	}
	if !m.Refresh(true) {
		t.Fatal("a forced refresh was refused")
	}
	if _, err := m.Mapping(gvk); !meta.IsNoMatchError(err) {
		t.Fatalf("Mapping after a refresh: %v, want no match", err)
	}
	disco.Resources = []*metav1.APIResourceList{&core, &widgets}
	if ns, err := m.Namespaced(gvk); err == nil || ns {
		// Refreshes are rate limited to one a second: the miss above used it.
		t.Fatalf("Namespaced within a second of a refresh: %v, %v; want no match", ns, err)
	}
}

// manyKinds is the discovery of a cluster with 2,500 CRDs, ten to a group:
// kinds Widget0 to Widget9 of groups g0.example.com to g249.example.com.
func manyKinds() *fakediscovery.FakeDiscovery {
	disco := k8sfake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	for g := range 250 {
		l := &metav1.APIResourceList{GroupVersion: fmt.Sprintf("g%d.example.com/v1", g)}
		for k := range 10 {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: fmt.Sprintf("widget%ds", k), Kind: fmt.Sprintf("Widget%d", k), Namespaced: true, Verbs: metav1.Verbs{"get", "list"}})
		}
		disco.Resources = append(disco.Resources, l)
	}
	return disco
}

// indexCount counts the times the Mapper reads every resource served.
type indexCount struct {
	discovery.CachedDiscoveryInterface
	n int
}

func (c *indexCount) ServerPreferredResources() ([]*metav1.APIResourceList, error) {
	c.n++
	return c.CachedDiscoveryInterface.ServerPreferredResources()
}

// A manifest may name an unserved kind a thousand times, or a thousand
// unserved kinds. Each miss went through every resource served to say what
// the manifest likely meant: 4 ms with 2,500 CRDs, seconds of CPU for one
// reconcile. The Mapper now remembers a miss, with what it suggested, until
// discovery is refreshed (a miss asks for that at most once a second), reads
// the resources served once per refresh, and suggests for at most 64 kinds
// between two.
func TestMapperRemembersMissesUntilARefresh(t *testing.T) {
	disco := manyKinds()
	clk := clocktesting.NewFakeClock(time.Now())
	m := newMapper(disco, clk)
	reads := &indexCount{CachedDiscoveryInterface: m.discovery}
	m.discovery = reads
	slip := schema.GroupVersionKind{Group: "g7.example.com", Version: "v1", Kind: "Widgit1"}

	for range 1000 {
		_, err := m.Mapping(slip)
		if !meta.IsNoMatchError(err) || !strings.Contains(err.Error(), `did you mean "Widget`) {
			t.Fatalf("Mapping(%v): %v; want no match, and the kind it likely meant", slip, err)
		}
	}
	unsuggested := 0
	for i := range 1000 {
		gvk := schema.GroupVersionKind{Group: "g8.example.com", Version: "v1", Kind: fmt.Sprintf("Widget%d", 10+i)}
		_, err := m.Mapping(gvk)
		if !meta.IsNoMatchError(err) {
			t.Fatalf("Mapping(%v): %v; want no match", gvk, err)
		}
		if !strings.Contains(err.Error(), "did you mean") {
			unsuggested++
		}
	}
	if reads.n != 1 {
		t.Errorf("2,000 misses read every resource served %d times; want once", reads.n)
	}
	// The first miss took one suggestion, the next 63 of the other kinds
	// (each a slip of Widget1 to Widget9 or not) the rest.
	if unsuggested < 1000-maxSuggestions+1 {
		t.Errorf("%d of 1,000 unserved kinds went without a suggestion; want all past the first %d suggestions", unsuggested, maxSuggestions)
	}

	// The kind is served now: the miss is remembered until a refresh, which
	// a miss asks for once a second has passed since the last.
	disco.Resources[7].APIResources = append(disco.Resources[7].APIResources,
		metav1.APIResource{Name: "widgit1s", Kind: "Widgit1", Namespaced: true, Verbs: metav1.Verbs{"get", "list"}})
	if _, err := m.Mapping(slip); !meta.IsNoMatchError(err) {
		t.Fatalf("Mapping within a second of the refresh: %v; want the miss remembered", err)
	}
	clk.Step(time.Second)
	if mp, err := m.Mapping(slip); err != nil || mp.Resource.Resource != "widgit1s" {
		t.Fatalf("Mapping a second later: %v, %v; want the kind served now", mp, err)
	}
}

// BenchmarkMapperReconcileOfUnservedKinds: a reconcile of a manifest naming
// ten unserved kinds a hundred times each, on a cluster of 2,500 CRDs, just
// after a refresh (the worst case: each refresh makes every kind a miss
// again). Before misses were remembered, each miss cost some 4 ms.
func BenchmarkMapperReconcileOfUnservedKinds(b *testing.B) {
	clk := clocktesting.NewFakeClock(time.Now())
	m := newMapper(manyKinds(), clk)
	for b.Loop() {
		clk.Step(time.Second)
		for i := range 1000 {
			if _, err := m.Mapping(schema.GroupVersionKind{Group: "g7.example.com", Version: "v1", Kind: fmt.Sprintf("Widgit%d", i%10)}); err == nil {
				b.Fatal("found")
			}
		}
	}
}

package destination

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

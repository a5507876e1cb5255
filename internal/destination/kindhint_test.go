// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

func gvk(apiVersion, kind string) schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(apiVersion, kind)
}

func TestSuggestKind(t *testing.T) {
	served := []schema.GroupVersionKind{
		gvk("v1", "ConfigMap"), gvk("v1", "Service"), gvk("apps/v1", "Deployment"), gvk("apps/v1", "DaemonSet"),
		gvk("networking.k8s.io/v1", "Ingress"), gvk("autoscaling/v2", "HorizontalPodAutoscaler"), gvk("autoscaling/v1", "HorizontalPodAutoscaler"),
		gvk("example.com/v2", "Widget"), gvk("example.com/v2", "Gizmo"),
	}
	for _, tt := range []struct {
		want       schema.GroupVersionKind
		suggestion string
	}{
		{gvk("apps/v1beta1", "Deployment"), `it serves Deployment as apiVersion "apps/v1"`},
		{gvk("v1", "Deployment"), `it serves Deployment as apiVersion "apps/v1"`},
		{gvk("extensions/v1beta1", "Ingress"), `it serves Ingress as apiVersion "networking.k8s.io/v1"`},
		{gvk("autoscaling/v2beta2", "HorizontalPodAutoscaler"), `it serves HorizontalPodAutoscaler as apiVersion "autoscaling/v2" or "autoscaling/v1"`},
		{gvk("apps/v1", "Deploymnet"), `did you mean "Deployment" (apiVersion "apps/v1")? If not, is its CustomResourceDefinition installed?`},
		{gvk("apps/v1", "deployment"), `did you mean "Deployment" (apiVersion "apps/v1")?`},
		{gvk("v1", "Servce"), `did you mean "Service" (apiVersion "v1")?`},
		{gvk("example.com/v1", "Widgte"), `did you mean "Widget" (apiVersion "example.com/v2")?`},
		// Nothing close: a CRD not installed yet, another group's similar
		// kind, a name too far from any.
		{gvk("example.com/v1", "Sprocket"), ""},
		{gvk("other.example.com/v1", "Widgte"), ""},
		{gvk("apps/v1", "Deploy"), ""},
		{gvk("v1", "Sevrice"+strings.Repeat("x", 10000)), ""},
	} {
		got := suggestKind(tt.want, served)
		if tt.suggestion == "" && got != "" || !strings.HasPrefix(got, tt.suggestion) {
			t.Errorf("suggestKind(%s) = %q, want %q", tt.want, got, tt.suggestion)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"deployment", "deploymnet", 1}, {"service", "servce", 1},
		{"kitten", "sitting", 3}, {"ab", "ba", 1}, {"abc", "ca", 3},
	} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// The Mapper's no-match error says what was likely meant and is still a
// no-match error.
func TestMapperSuggestsWhatAnUnservedKindMeant(t *testing.T) {
	disco := k8sfake.NewClientset().Discovery().(*fakediscovery.FakeDiscovery)
	disco.Resources = []*metav1.APIResourceList{{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
		{Name: "deployments", Kind: "Deployment", Namespaced: true, Verbs: metav1.Verbs{"get", "list"}},
		{Name: "deployments/scale", Kind: "Scale", Namespaced: true, Verbs: metav1.Verbs{"get"}},
	}}}
	m := newMapper(disco, clocktesting.NewFakeClock(time.Now()))
	_, err := m.Mapping(gvk("apps/v1beta1", "Deployment"))
	if !meta.IsNoMatchError(err) {
		t.Fatalf("Mapping: %v, want no match", err)
	}
	s, ok := err.(interface{ KindSuggestion() string })
	if !ok || s.KindSuggestion() != `it serves Deployment as apiVersion "apps/v1"` {
		t.Fatalf("Mapping's error %v does not suggest apps/v1", err)
	}
	// A subresource's kind is not a kind a manifest can name.
	if _, err := m.Mapping(gvk("apps/v1", "Scal")); err == nil || strings.Contains(err.Error(), "Scale") {
		t.Errorf("Mapping of a subresource's kind: %v", err)
	}
}

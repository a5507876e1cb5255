package controller

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// TestResolveImpersonatesTheNamedOrDefaultServiceAccount covers the choice
// of identity; that the API server then enforces it is shown end to end in
// tenancy_test.go. Resolving a local destination makes no request, so the
// clients point nowhere.
func TestResolveImpersonatesTheNamedOrDefaultServiceAccount(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	clients := Clients{Kube: kubernetes.NewForConfigOrDie(cfg), Dynamic: dynamic.NewForConfigOrDie(cfg), Config: cfg}
	reg, err := watchregistry.New(watchregistry.Options[cacheKey]{
		Map:     func(watchregistry.Event) []cacheKey { return nil },
		Enqueue: func(cacheKey, watchregistry.Event) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDestinations(clients, reg, clock.RealClock{}, "vidra-system", func(cache.ObjectName) {})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		named      string
		defaultSA  string
		wantActing string
	}{
		{"none: the operator's identity", "", "", ""},
		{"named", "deployer", "", "team-a/deployer"},
		{"default for a resource that names none", "", "fallback", "team-a/fallback"},
		{"named wins over the default", "deployer", "fallback", "team-a/deployer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
			vr.Spec.ServiceAccountName = tc.named
			dest, err := d.resolve(t.Context(), vr, tc.defaultSA)
			if err != nil {
				t.Fatal(err)
			}
			if dest.serviceAccount != tc.wantActing || dest.cluster != localCluster {
				t.Fatalf("acting as %q on cluster %q; want %q on the local cluster", dest.serviceAccount, dest.cluster, tc.wantActing)
			}
			if (dest.client == clients.Dynamic) != (tc.wantActing == "") {
				t.Errorf("client is the operator's own: %v; want %v", dest.client == clients.Dynamic, tc.wantActing == "")
			}
		})
	}
	// The same identity gets the same client: one connection pool per
	// ServiceAccount, not per reconcile.
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
	a, _ := d.resolve(t.Context(), vr, "fallback")
	b, _ := d.resolve(t.Context(), vr, "fallback")
	if a.client != b.client {
		t.Error("impersonating clients are not cached")
	}
}

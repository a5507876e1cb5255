// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// TestResolveImpersonatesTheNamedOrDefaultServiceAccount covers the choice
// of identity; that the API server then enforces it is shown end to end in
// test/e2e/tenancy_test.go. Resolving a local destination makes no request, so the
// clients point nowhere.
func TestResolveImpersonatesTheNamedOrDefaultServiceAccount(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	dyn := dynamic.NewForConfigOrDie(cfg)
	reg, err := watchregistry.New(watchregistry.Options[cache.ObjectName]{
		Map:     func(watchregistry.Event) []cache.ObjectName { return nil },
		Enqueue: func(cache.ObjectName, watchregistry.Event) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	resolver := func(t *testing.T, defaultSA string) *Resolver {
		d, err := New(Options{Kube: kubernetes.NewForConfigOrDie(cfg), Dynamic: dyn, Config: cfg, Registry: reg,
			Namespace: "vidra-system", DefaultServiceAccount: defaultSA, TrustedNamespaces: []string{AllNamespaces}})
		if err != nil {
			t.Fatal(err)
		}
		return d
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
			dest, err := resolver(t, tc.defaultSA).Resolve(t.Context(), vr)
			if err != nil {
				t.Fatal(err)
			}
			if dest.ServiceAccount != tc.wantActing || dest.Cluster != LocalCluster {
				t.Fatalf("acting as %q on cluster %q; want %q on the local cluster", dest.ServiceAccount, dest.Cluster, tc.wantActing)
			}
			if (dest.Client == dyn) != (tc.wantActing == "") {
				t.Errorf("client is the operator's own: %v; want %v", dest.Client == dyn, tc.wantActing == "")
			}
		})
	}
	// The same identity gets the same client: one connection pool per
	// ServiceAccount, not per reconcile.
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
	d := resolver(t, "fallback")
	a, _ := d.Resolve(t.Context(), vr)
	b, _ := d.Resolve(t.Context(), vr)
	if a.Client != b.Client {
		t.Error("impersonating clients are not cached")
	}
}

// TestActingServiceAccountFailsClosed is the one decision of who acts for a
// resource: outside the trusted namespaces a resource names a ServiceAccount,
// or the operator names a default one, or nothing is done at all.
func TestActingServiceAccountFailsClosed(t *testing.T) {
	tests := []struct {
		name      string
		trusted   []string
		namespace string
		named     string
		defaultSA string
		want      string
		refused   bool
	}{
		{name: "the operator's namespace is trusted by default", namespace: "vidra-system", want: ""},
		{name: "another namespace is not", namespace: "team-a", refused: true},
		{name: "a named ServiceAccount acts anywhere", namespace: "team-a", named: "deployer", want: "deployer"},
		{name: "the default ServiceAccount acts anywhere", namespace: "team-a", defaultSA: "fallback", want: "fallback"},
		{name: "named wins over the default", namespace: "team-a", named: "deployer", defaultSA: "fallback", want: "deployer"},
		{name: "the default applies in a trusted namespace too", namespace: "vidra-system", defaultSA: "fallback", want: "fallback"},
		{name: "a listed namespace is trusted", trusted: []string{"team-a", " platform "}, namespace: "platform", want: ""},
		{name: "listing namespaces replaces the default", trusted: []string{"team-a"}, namespace: "vidra-system", refused: true},
		{name: "star trusts every namespace", trusted: []string{"*"}, namespace: "anywhere", want: ""},
		{name: "empty entries are ignored", trusted: []string{"", " "}, namespace: "vidra-system", want: ""},
		{name: "a user name is refused", trusted: []string{"*"}, namespace: "team-a", named: "kube-system:admin", refused: true},
		{name: "a default that is no ServiceAccount name is refused", namespace: "team-a", defaultSA: "a:b", refused: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := actingServiceAccount(tc.namespace, tc.named, tc.defaultSA, newTrust(tc.trusted, "vidra-system"))
			if tc.refused {
				var re *refusedError
				if !errors.As(err, &re) || re.reason != v1alpha1.ReasonServiceAccountRequired {
					t.Fatalf("got %q, %v; want ServiceAccountRequired", got, err)
				}
				if reason, retry := Failure(err); reason != v1alpha1.ReasonServiceAccountRequired || retry {
					t.Errorf("reported as %s, retry %v; want ServiceAccountRequired without retry", reason, retry)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestServiceAccountRequiredSaysTheWaysOut: the message is all a tenant
// sees; it names each fix.
func TestServiceAccountRequiredSaysTheWaysOut(t *testing.T) {
	_, err := actingServiceAccount("team-a", "", "", newTrust(nil, "vidra-system"))
	if err == nil {
		t.Fatal("not refused")
	}
	for _, want := range []string{"team-a", "spec.serviceAccountName", "--default-service-account", "--trusted-namespaces", "vidra-system"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q: %s", want, err)
		}
	}
}

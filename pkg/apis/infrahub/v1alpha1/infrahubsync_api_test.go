// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1_test

import (
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// The CRD refuses what a tenant could use to make Infrahub read something
// other than meant, and bounds every string a tenant sets.
func TestInfrahubSyncRefusesWhatInfrahubWouldMisread(t *testing.T) {
	cs, ns := setup(t)
	root, _ := testenv.RepoRoot()
	if err := testenv.InstallCRDs(t.Context(), env.Config, filepath.Join(root, "manifests/crd/infrahub.operators.com_infrahubsyncs.yaml")); err != nil {
		t.Fatal(err)
	}
	base := func() *v1alpha1.InfrahubSync {
		return &v1alpha1.InfrahubSync{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "sync-"},
			Spec: v1alpha1.InfrahubSyncSpec{Source: v1alpha1.InfrahubSource{
				InfrahubAPIURL: "https://infrahub.example.com", ArtefactName: "device-config",
			}},
		}
	}
	created, err := cs.InfrahubV1alpha1().InfrahubSyncs(ns).Create(t.Context(), base(), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a minimal sync was refused: %v", err)
	}
	if created.Spec.Source.TargetBranch != "main" {
		t.Errorf("targetBranch defaulted to %q, want main", created.Spec.Source.TargetBranch)
	}
	for _, ok := range []string{"2h", "30m", "now-2h", "2025-01-31", "2025-01-31T12:00:00Z", "2025-01-31T12:00:00+02:00"} {
		s := base()
		s.Spec.Source.TargetDate = ok
		if _, err := cs.InfrahubV1alpha1().InfrahubSyncs(ns).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Errorf("targetDate %q refused: %v", ok, err)
		}
	}
	tests := []struct {
		name   string
		mutate func(*v1alpha1.InfrahubSync)
		field  string
	}{
		{"now+2h, which Infrahub reads as two hours ago", func(s *v1alpha1.InfrahubSync) { s.Spec.Source.TargetDate = "now+2h" }, "spec.source.targetDate"},
		{"days, which Infrahub does not read", func(s *v1alpha1.InfrahubSync) { s.Spec.Source.TargetDate = "-2d" }, "spec.source.targetDate"},
		{"a date with words around it", func(s *v1alpha1.InfrahubSync) { s.Spec.Source.TargetDate = "since 2h ago" }, "spec.source.targetDate"},
		{"no artifacts named", func(s *v1alpha1.InfrahubSync) { s.Spec.Source.ArtefactName = "" }, "spec.source"},
		{"a URL that is not http(s)", func(s *v1alpha1.InfrahubSync) { s.Spec.Source.InfrahubAPIURL = "file:///etc/passwd" }, "spec.source.infrahubAPIURL"},
		{"a huge URL", func(s *v1alpha1.InfrahubSync) {
			s.Spec.Source.InfrahubAPIURL = "https://x/" + strings.Repeat("a", 3000)
		}, "spec.source.infrahubAPIURL"},
		{"a huge artefactName", func(s *v1alpha1.InfrahubSync) { s.Spec.Source.ArtefactName = strings.Repeat("a", 300) }, "spec.source.artefactName"},
		{"a branch with ..", func(s *v1alpha1.InfrahubSync) { s.Spec.Source.TargetBranch = "a/../b" }, "spec.source.targetBranch"},
		{"an interval under a second", func(s *v1alpha1.InfrahubSync) { s.Spec.Interval = &metav1.Duration{Duration: 1} }, "spec.interval"},
		{"a query name with a space", func(s *v1alpha1.InfrahubSync) { s.Spec.QueryName = "my query" }, "spec.queryName"},
		{"a user name for a ServiceAccount", func(s *v1alpha1.InfrahubSync) {
			s.Spec.Template.ServiceAccountName = "system:serviceaccount:other:admin"
		}, "spec.template.serviceAccountName"},
		{"a Secret in another namespace's form", func(s *v1alpha1.InfrahubSync) {
			s.Spec.Source.CredentialsSecretRef = &v1alpha1.LocalSecretReference{Name: "other/infrahub"}
		}, "spec.source.credentialsSecretRef.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			tt.mutate(s)
			_, err := cs.InfrahubV1alpha1().InfrahubSyncs(ns).Create(t.Context(), s, metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("err = %v, want a refusal naming %s", err, tt.field)
			}
		})
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"path/filepath"
	"slices"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestUserConfigAuthenticatesAsThatUser(t *testing.T) {
	cfg, err := env.UserConfig("bench-operator", "system:masters", "vidra")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := review.Status.UserInfo
	if u.Username != "bench-operator" || !slices.Contains(u.Groups, "system:masters") || !slices.Contains(u.Groups, "vidra") {
		t.Fatalf("authenticated as %q in %v, want bench-operator in system:masters and vidra", u.Username, u.Groups)
	}
	if _, err := cs.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("system:masters member cannot read: %v", err)
	}
}

func TestUserKubeconfigWithoutGroupsIsNotAdmin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteUserKubeconfig(path, "nobody-special"); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("get namespace as a user without RBAC: err = %v, want Forbidden", err)
	}
}

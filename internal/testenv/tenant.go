// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CreateConfigMapTenant creates ServiceAccount name in ns with rights on the
// ConfigMaps of ns only, with the verbs docs/multitenancy.md tells an
// administrator to grant, and returns its user name.
func CreateConfigMapTenant(ctx context.Context, cs kubernetes.Interface, ns, name string) (string, error) {
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create ServiceAccount %s/%s: %w", ns, name, err)
	}
	role := name + "-configmaps"
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"},
			Verbs: []string{"get", "create", "patch", "delete"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create Role %s/%s: %w", ns, role, err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}},
	}, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create RoleBinding %s/%s: %w", ns, role, err)
	}
	return "system:serviceaccount:" + ns + ":" + name, nil
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Namespace creates a namespace named prefix plus a random suffix, for one
// test to isolate itself in, and deletes it when the test ends.
func Namespace(t testing.TB, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create test namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

var env *Env

func TestMain(m *testing.M) { RunMain(m, &env, Options{}) }

func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func testNamespace(t *testing.T, cs kubernetes.Interface) string {
	return Namespace(t, cs, "testenv-")
}

func TestCreateGetListRoundTrip(t *testing.T) {
	ctx := t.Context()
	cs := clientset(t)
	ns := testNamespace(t, cs)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "round-trip"}, Data: map[string]string{"k": "v"}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "round-trip", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["k"] != "v" {
		t.Fatalf("data = %v, want k=v", got.Data)
	}
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, item := range list.Items {
		found = found || item.Name == "round-trip"
	}
	if !found {
		t.Fatalf("list of %d ConfigMaps misses round-trip", len(list.Items))
	}
}

func TestKubeconfigReachesTheAPIServer(t *testing.T) {
	data, err := env.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != KubernetesVersion {
		t.Fatalf("server version %q, want %q", v.GitVersion, KubernetesVersion)
	}
}

func TestOwnedObjectIsGarbageCollected(t *testing.T) {
	ctx := t.Context()
	cs := clientset(t)
	ns := testNamespace(t, cs)
	owner, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:            "dependent",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "dependent", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("dependent was not garbage-collected: %v", err)
	}
}

func TestDeletedNamespaceFinishesTerminating(t *testing.T) {
	ctx := t.Context()
	cs := clientset(t)
	ns := testNamespace(t, cs)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "content"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("namespace %s did not finish terminating: %v", ns, err)
	}
}

func TestAPIServerRestartKeepsState(t *testing.T) {
	ctx := t.Context()
	cs := clientset(t)
	ns := testNamespace(t, cs)
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survivor"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.StopAPIServer()
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "survivor", metav1.GetOptions{}); err == nil {
		t.Fatal("API server still answers after StopAPIServer")
	}
	if err := env.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "survivor", metav1.GetOptions{}); err != nil {
		t.Fatalf("state lost across an API server restart: %v", err)
	}
}

// TestEnvIsNamedForTheHarness: the directory of the harness's control plane
// is named for it, so that its stale leftovers are the harness's to remove.
func TestEnvIsNamedForTheHarness(t *testing.T) {
	if base := filepath.Base(env.Dir); !strings.HasPrefix(base, Name+"-") {
		t.Fatalf("control plane directory %s, want a name starting with %s-", base, Name)
	}
}

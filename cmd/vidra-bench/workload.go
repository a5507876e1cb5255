// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

// benchLabel marks everything the benchmark creates, so that its watches
// and lists see nothing else.
const benchLabel = "bench.vidra.dev/run"

// Names of the four objects of every resource, the same in each namespace.
const (
	objName    = "app"
	configName = "app-config"
	configKey  = "greeting"
)

// appManifest is what one VidraResource holds and what the baseline applies
// once per namespace: a ConfigMap, a ServiceAccount, a Service and a
// Deployment scaled to zero, the smallest realistic application. No namespace
// is set: Vidra gives them the resource's namespace, kubectl the one named in
// withNamespace.
func appManifest(i int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: %[2]s
data:
  %[3]s: hello-%[1]d
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: %[4]s
---
apiVersion: v1
kind: Service
metadata:
  name: %[4]s
spec:
  selector:
    app: %[4]s
  ports:
  - name: http
    port: 80
    targetPort: 8080
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[4]s
spec:
  replicas: 0
  selector:
    matchLabels:
      app: %[4]s
  template:
    metadata:
      labels:
        app: %[4]s
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
        ports:
        - containerPort: 8080
`, i, configName, configKey, objName)
}

// withNamespace puts every document of manifest in namespace ns, for the
// kubectl baseline's single multi-document file.
func withNamespace(manifest, ns string) string {
	return strings.ReplaceAll(manifest, "\nmetadata:\n", "\nmetadata:\n  namespace: "+ns+"\n")
}

func nsName(prefix string, i int) string { return fmt.Sprintf("%s-%04d", prefix, i) }

// createNamespaces creates namespaces prefix-0000 … in parallel; existing ones
// are fine.
func createNamespaces(ctx context.Context, kube kubernetes.Interface, prefix string, n, parallel int) error {
	return parallelDo(ctx, n, parallel, func(ctx context.Context, i int) error {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: nsName(prefix, i), Labels: map[string]string{benchLabel: prefix},
		}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", nsName(prefix, i), err)
		}
		return nil
	})
}

// newResource is VidraResource "app" of namespace ns. eventMode false and a
// non-zero interval make a periodic-only resource.
func newResource(ns string, i int, eventMode bool, interval *metav1.Duration) *v1alpha1.VidraResource {
	return &v1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: objName, Namespace: ns, Labels: map[string]string{benchLabel: "app"}},
		Spec: v1alpha1.VidraResourceSpec{
			Manifest:    appManifest(i),
			Destination: v1alpha1.Destination{ReconcileOnEvents: ptr.To(eventMode)},
			Interval:    interval,
		},
	}
}

func createResources(ctx context.Context, vidra versioned.Interface, prefix string, n, parallel int, eventMode bool, interval *metav1.Duration) error {
	return parallelDo(ctx, n, parallel, func(ctx context.Context, i int) error {
		vr := newResource(nsName(prefix, i), i, eventMode, interval)
		if _, err := vidra.InfrahubV1alpha1().VidraResources(vr.Namespace).Create(ctx, vr, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create VidraResource %s/%s: %w", vr.Namespace, vr.Name, err)
		}
		return nil
	})
}

// parallelDo runs fn for 0 … n-1 on parallel goroutines and returns the first
// error; the others stop early once one failed.
func parallelDo(ctx context.Context, n, parallel int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range parallel {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return first
}

// releaseServiceIPs deletes the Services of namespaces prefix-0000 … and
// waits until the API server has released their cluster IPs. Allocating a
// cluster IP costs the API server more the more IPs are allocated, so the
// baseline's Services would otherwise make every Service the operator
// creates dearer than the one kubectl created, and the comparison unfair.
func releaseServiceIPs(ctx context.Context, kube kubernetes.Interface, prefix string, n, parallel int) error {
	before, err := kube.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list IP addresses: %w", err)
	}
	err = parallelDo(ctx, n, parallel, func(ctx context.Context, i int) error {
		err := kube.CoreV1().Services(nsName(prefix, i)).Delete(ctx, objName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Service %s/%s: %w", nsName(prefix, i), objName, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	want := len(before.Items) - n
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := kube.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Errorf("list IP addresses: %w", err)
		}
		return len(l.Items) <= want, nil
	})
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package fake_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
	"github.com/vidra-operator/vidra/pkg/watchregistry/fake"
)

// A unit test of an operator built on the registry, with no API server: the
// fake dynamic client stands in for it, and its owner "default/my-app" is
// woken when someone else edits the ConfigMap it manages.
func Example() {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	dyn := dynamicfake.NewSimpleDynamicClient(scheme)
	fake.BumpResourceVersions(dyn) // or every update reads as a resync

	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]())
	defer queue.ShutDown()
	reg, err := watchregistry.New(watchregistry.Options[cache.ObjectName]{
		Map: func(ev watchregistry.Event) []cache.ObjectName {
			owner, err := cache.ParseObjectName(ev.Object.GetAnnotations()["example.com/owner"])
			if err != nil {
				return nil
			}
			return []cache.ObjectName{owner}
		},
		Enqueue: func(key cache.ObjectName, _ watchregistry.Event) { queue.Add(key) },
	})
	if err != nil {
		panic(err)
	}
	reg.SetCluster("", dyn, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-reg.Done() }()
	if err := reg.Start(ctx); err != nil {
		panic(err)
	}

	owner := cache.ObjectName{Namespace: "default", Name: "my-app"}
	ref := watchregistry.Ref{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "default"}
	if err := reg.Track(owner, []watchregistry.Ref{ref}); err != nil {
		panic(err)
	}
	wait, done := context.WithTimeout(ctx, 10*time.Second)
	defer done()
	if err := reg.WaitForSync(wait, ref); err != nil {
		panic(err)
	}
	key, _ := queue.Get() // woken once the informer has listed
	fmt.Println("woken:", key)
	queue.Done(key)

	cms := dyn.Resource(ref.GVR).Namespace("default")
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetName("my-app-settings")
	cm.SetAnnotations(map[string]string{"example.com/owner": "default/my-app"})
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	key, _ = queue.Get()
	fmt.Println("woken:", key)
	queue.Done(key)

	// The reconcile reads typed objects from the cache.
	got, err := watchregistry.GetTyped[corev1.ConfigMap](reg, ref, "default", "my-app-settings")
	if err != nil {
		panic(err)
	}
	fmt.Println("cached:", got.Name, "at resourceVersion", got.ResourceVersion)
	// Output:
	// woken: default/my-app
	// woken: default/my-app
	// cached: my-app-settings at resourceVersion 1
}

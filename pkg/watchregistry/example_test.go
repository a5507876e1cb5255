// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// An operator whose custom resources ("apps") manage ConfigMaps: it labels
// what it manages and names the owner in an annotation, and its workqueue is
// fed by the registry.
func ExampleRegistry() {
	cfg := env.Config // the operator's *rest.Config
	cs := kubernetes.NewForConfigOrDie(cfg)
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
		workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "apps"})
	defer queue.ShutDown()

	reg, err := watchregistry.New(watchregistry.Options[cache.ObjectName]{
		LabelSelector: "app.kubernetes.io/managed-by=example-operator",
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
	reg.SetCluster("", dynamic.NewForConfigOrDie(cfg), metadata.NewForConfigOrDie(cfg))
	ctx, cancel := context.WithCancel(context.Background())
	if err := reg.Start(ctx); err != nil {
		panic(err)
	}
	defer func() { cancel(); <-reg.Done() }()

	// The reconcile of default/my-app applies its objects, then says what it
	// needs watched.
	owner := cache.ObjectName{Namespace: "default", Name: "my-app"}
	ref := watchregistry.Ref{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "default"}
	if err := reg.Track(owner, []watchregistry.Ref{ref}); err != nil {
		panic(err)
	}

	// Once the informer has listed, the owner is woken once.
	key, _ := queue.Get()
	fmt.Println("woken:", key)
	queue.Done(key)

	// Somebody else creates (or edits, or deletes) a managed object.
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:        "my-app-settings",
		Labels:      map[string]string{"app.kubernetes.io/managed-by": "example-operator"},
		Annotations: map[string]string{"example.com/owner": "default/my-app"},
	}}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
	key, _ = queue.Get()
	fmt.Println("woken:", key)
	queue.Done(key)

	// The reconcile reads from the cache, not from the API server.
	cm, err := reg.Get(ref, "default", "my-app-settings")
	if err != nil {
		panic(err)
	}
	fmt.Println("cached:", cm.GetName())

	// The owner is deleted: its informers linger, then stop.
	reg.Forget(owner)
	_ = cs.CoreV1().ConfigMaps("default").Delete(ctx, "my-app-settings", metav1.DeleteOptions{})

	// It prints:
	//	woken: default/my-app
	//	woken: default/my-app
	//	cached: my-app-settings
}

// TestExampleRegistry runs ExampleRegistry and checks what it prints. The
// example has no Output comment, so go test only compiles it: an example
// cannot skip, and it needs the control plane that -short does not start.
func TestExampleRegistry(t *testing.T) {
	controlPlane(t)
	got := stdoutOf(t, ExampleRegistry)
	want := "woken: default/my-app\nwoken: default/my-app\ncached: my-app-settings\n"
	if got != want {
		t.Fatalf("ExampleRegistry printed:\n%s\nwant:\n%s", got, want)
	}
}

// stdoutOf runs fn with os.Stdout redirected, as go test runs an example,
// and returns what it printed. The example panics on errors: the panic fails
// the test, with what was printed so far, instead of killing the binary
// with os.Stdout still redirected.
func stdoutOf(t *testing.T, fn func()) string {
	t.Helper()
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(&out, rd)
		rd.Close()
	}()
	stdout := os.Stdout
	os.Stdout = wr
	var panicked any
	func() {
		defer func() { panicked = recover() }()
		fn()
	}()
	os.Stdout = stdout
	wr.Close()
	<-copied
	if panicked != nil {
		t.Fatalf("panic: %v; printed before:\n%s", panicked, out.String())
	}
	return out.String()
}

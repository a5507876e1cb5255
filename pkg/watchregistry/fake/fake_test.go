// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package fake_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
	"github.com/vidra-operator/vidra/pkg/watchregistry/fake"
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// events collects the event types delivered for each object name.
type events struct {
	ch chan watchregistry.Event
}

func (e events) next(t *testing.T, what string) watchregistry.Event {
	t.Helper()
	select {
	case ev := <-e.ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("no event: waiting for %s", what)
		return watchregistry.Event{}
	}
}

func TestUpdateThroughTheFakeClientIsDelivered(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClient(scheme)
	fake.BumpResourceVersions(dyn)

	ctx, reg, evs := startRegistry(t, watchregistry.Options[string]{}, dyn, nil)
	ref := watchregistry.Ref{GVR: configMaps, Namespace: "ns"}
	trackListed(ctx, t, reg, evs, ref)

	client := dyn.Resource(configMaps).Namespace("ns")
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace("ns")
	cm.SetName("settings")
	created, err := client.Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ev := evs.next(t, "the add"); ev.Type != watchregistry.EventAdded || ev.Object.GetResourceVersion() != created.GetResourceVersion() {
		t.Fatalf("event %s at %s, want Added at %s", ev.Type, ev.Object.GetResourceVersion(), created.GetResourceVersion())
	}
	for _, write := range []func() (*unstructured.Unstructured, error){
		func() (*unstructured.Unstructured, error) {
			u := created.DeepCopy()
			u.Object["data"] = map[string]any{"k": "updated"}
			return client.Update(ctx, u, metav1.UpdateOptions{})
		},
		func() (*unstructured.Unstructured, error) {
			return client.Patch(ctx, "settings", types.MergePatchType, []byte(`{"data":{"k":"patched"}}`), metav1.PatchOptions{})
		},
	} {
		written, err := write()
		if err != nil {
			t.Fatal(err)
		}
		ev := evs.next(t, "the update")
		if ev.Type != watchregistry.EventUpdated || ev.Object.GetResourceVersion() != written.GetResourceVersion() {
			t.Fatalf("event %s at %s, want Updated at %s", ev.Type, ev.Object.GetResourceVersion(), written.GetResourceVersion())
		}
	}
	// The typed read sees the last write.
	err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got, err := watchregistry.GetTyped[corev1.ConfigMap](reg, ref, "ns", "settings")
		return err == nil && got.Data["k"] == "patched", nil
	})
	if err != nil {
		t.Fatalf("cache did not follow the patch: %v", err)
	}
	if n := reg.Stats().Filtered[watchregistry.FilterResync]; n != 0 {
		t.Fatalf("%d updates filtered as resyncs", n)
	}
}

// startRegistry runs a registry of opts on the clients until the test
// ends, with the events it enqueues in the events returned and, unless
// opts has one, a Map that wakes "owner" for every object.
func startRegistry(t *testing.T, opts watchregistry.Options[string], dyn dynamic.Interface, md metadata.Interface) (context.Context, *watchregistry.Registry[string], events) {
	t.Helper()
	evs := events{ch: make(chan watchregistry.Event, 16)}
	opts.Enqueue = func(_ string, ev watchregistry.Event) { evs.ch <- ev }
	if opts.Map == nil {
		opts.Map = func(watchregistry.Event) []string { return []string{"owner"} }
	}
	reg, err := watchregistry.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	reg.SetCluster("", dyn, md)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); <-reg.Done() })
	if err := reg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return ctx, reg, evs
}

// trackListed tracks ref for "owner" and waits for its initial list.
func trackListed(ctx context.Context, t *testing.T, reg *watchregistry.Registry[string], evs events, refs ...watchregistry.Ref) {
	t.Helper()
	if err := reg.Track("owner", refs); err != nil {
		t.Fatal(err)
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, 10*time.Second)
	defer waitCancel()
	for _, ref := range refs {
		if err := reg.WaitForSync(waitCtx, ref); err != nil {
			t.Fatal(err)
		}
	}
	if ev := evs.next(t, "the initial list"); ev.Type != watchregistry.EventInitialList {
		t.Fatalf("first event %s, want InitialList", ev.Type)
	}
}

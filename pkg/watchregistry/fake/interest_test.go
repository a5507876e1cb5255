// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package fake_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
	"github.com/vidra-operator/vidra/pkg/watchregistry/fake"
)

// TestInterestBySelectorListsWhatTheRegistryScopeDoesNot: on the fake
// client too, an interest by a label selector reads and is woken for an
// object of that selector which the registry's own selector does not list.
// (The fake's watch ignores label selectors; its list does not, so the
// object exists before the registry starts.)
func TestInterestBySelectorListsWhatTheRegistryScopeDoesNot(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	cm.SetNamespace("ns")
	cm.SetName("team-a")
	cm.SetLabels(map[string]string{"team": "a"})
	dyn := dynamicfake.NewSimpleDynamicClient(scheme)
	fake.BumpResourceVersions(dyn)
	if _, err := dyn.Resource(configMaps).Namespace("ns").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	in := watchregistry.NewInterests[string]()
	evs := events{ch: make(chan watchregistry.Event, 16)}
	reg, err := watchregistry.New(watchregistry.Options[string]{
		LabelSelector: "app.kubernetes.io/managed-by=me",
		Map:           in.Map(nil),
		Enqueue:       func(_ string, ev watchregistry.Event) { evs.ch <- ev },
	})
	if err != nil {
		t.Fatal(err)
	}
	reg.SetCluster("", dyn, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-reg.Done() }()
	if err := reg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	refs := in.Set("owner", []watchregistry.Interest{{
		Ref:      watchregistry.Ref{GVR: configMaps, Namespace: "ns"},
		Selector: labels.SelectorFromSet(labels.Set{"team": "a"}),
	}})
	if err := reg.Track("owner", refs); err != nil {
		t.Fatal(err)
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, 10*time.Second)
	defer waitCancel()
	if err := reg.WaitForSync(waitCtx, refs[0]); err != nil {
		t.Fatal(err)
	}
	if ev := evs.next(t, "the initial list"); ev.Type != watchregistry.EventInitialList {
		t.Fatalf("first event %s, want InitialList", ev.Type)
	}
	if _, err := reg.Get(refs[0], "ns", "team-a"); err != nil {
		t.Fatalf("Get of the selected ConfigMap: %v", err)
	}
	written, err := dyn.Resource(configMaps).Namespace("ns").Patch(ctx, "team-a", types.MergePatchType, []byte(`{"data":{"k":"v"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ev := evs.next(t, "the update"); ev.Type != watchregistry.EventUpdated || ev.Object.GetResourceVersion() != written.GetResourceVersion() {
		t.Fatalf("event %s, want Updated at %s", ev.Type, written.GetResourceVersion())
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package fake_test

import (
	"context"
	"testing"

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
	ctx, reg, evs := startRegistry(t, watchregistry.Options[string]{
		LabelSelector: "app.kubernetes.io/managed-by=me",
		Map:           in.Map(nil),
	}, dyn, nil)
	refs := in.Set("owner", []watchregistry.Interest{{
		Ref:      watchregistry.Ref{GVR: configMaps, Namespace: "ns"},
		Selector: labels.SelectorFromSet(labels.Set{"team": "a"}),
	}})
	trackListed(ctx, t, reg, evs, refs...)
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

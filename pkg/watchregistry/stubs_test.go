// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// Stubs lists what List cannot see: the objects held only as stubs, by the
// labels their Charge kept, with nothing of them but their identity and
// those labels. An owner that lost its record of what it created (a
// process killed before writing it down) finds them there.
func TestStubsListsTheObjectsHeldAsStubs(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cm := func(name, owner string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "1",
			Labels: map[string]string{"owner": owner, "team": "a"}}, Data: map[string]string{"k": strings.Repeat("v", 1<<10)}}
	}
	dyn := dynamicfake.NewSimpleDynamicClient(scheme, cm("full-a", "a"), cm("stub-a", "a"), cm("stub-b", "b"))
	reg, err := watchregistry.New(watchregistry.Options[string]{
		Map:     func(watchregistry.Event) []string { return nil },
		Enqueue: func(string, watchregistry.Event) {},
		Charge: func(_ watchregistry.Ref, u *unstructured.Unstructured) watchregistry.Charge {
			return watchregistry.Charge{Stub: strings.HasPrefix(u.GetName(), "stub-"), Labels: []string{"owner"}}
		},
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
	ref := watchregistry.Ref{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	if err := reg.Track("owner", []watchregistry.Ref{ref}); err != nil {
		t.Fatal(err)
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, 10*time.Second)
	defer waitCancel()
	if err := reg.WaitForSync(waitCtx, ref); err != nil {
		t.Fatal(err)
	}

	ownedByA := labels.SelectorFromSet(labels.Set{"owner": "a"})
	full, err := reg.List(ref, "ns", ownedByA)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) != 1 || full[0].GetName() != "full-a" {
		t.Errorf("List = %v, want full-a alone", names(full))
	}
	stubs, err := reg.Stubs(ref, "ns", ownedByA)
	if err != nil {
		t.Fatal(err)
	}
	if len(stubs) != 1 || stubs[0].GetName() != "stub-a" {
		t.Fatalf("Stubs = %v, want stub-a alone", names(stubs))
	}
	if l := stubs[0].GetLabels(); len(l) != 1 || l["owner"] != "a" {
		t.Errorf("the stub's labels = %v, want the kept owner label alone", l)
	}
	if _, ok := stubs[0].Object["data"]; ok {
		t.Error("the stub holds the data")
	}
	// A label the Charge did not keep matches no stub.
	if stubs, err := reg.Stubs(ref, "", labels.SelectorFromSet(labels.Set{"team": "a"})); err != nil || len(stubs) != 0 {
		t.Errorf("Stubs by a label not kept = %v, %v; want none", names(stubs), err)
	}
	if all, err := reg.Stubs(ref, "", nil); err != nil || len(all) != 2 {
		t.Errorf("Stubs of every owner = %v, %v; want stub-a and stub-b", names(all), err)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

const crdManifest = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
---
` + configMapManifest

// Discovery is the cluster's, shared by every resource. A manifest that
// declares a CRD its identity may not write must not make each of its
// reconciles discover the whole cluster again, past the refresh's rate
// limit.
func TestADeclaredCRDThatWasNotWrittenDoesNotRefreshDiscovery(t *testing.T) {
	vr := newVR(operatorNS, "crds", crdManifest)
	f := newFixture(t, []*v1alpha1.VidraResource{vr})
	disc := f.kube.Discovery().(*fakediscovery.FakeDiscovery)
	disc.Resources = append(disc.Resources, &metav1.APIResourceList{
		GroupVersion: "apiextensions.k8s.io/v1",
		APIResources: []metav1.APIResource{{Name: "customresourcedefinitions", Kind: "CustomResourceDefinition", Verbs: metav1.Verbs{"get", "list", "watch", "patch", "delete"}}},
	})
	refuse := func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, "widgets.example.com", errors.New("may not"))
	}
	f.dynamic.PrependReactor("patch", "customresourcedefinitions", refuse)
	f.meta.PrependReactor("patch", "customresourcedefinitions", refuse)
	f.dynamic.PrependReactor("get", "customresourcedefinitions", refuse)
	f.meta.PrependReactor("get", "customresourcedefinitions", refuse)

	key := cache.MetaObjectToName(vr)
	if _, err := f.run(key); err == nil {
		t.Fatal("the sync of a refused CRD succeeded, want an error to retry")
	}
	discoveries := func() int {
		n := 0
		for _, a := range f.kube.Actions() {
			if r := a.GetResource(); r.Group == "" && r.Version == "" && (r.Resource == "group" || r.Resource == "resource") {
				n++
			}
		}
		return n
	}
	before := discoveries()
	// Within the same second of the fake clock: only a forced refresh
	// could discover again.
	for range 3 {
		_, _ = f.c.sync(context.Background(), key)
	}
	if got := discoveries() - before; got != 0 {
		t.Errorf("3 more reconciles of a refused CRD made %d discovery requests, want 0", got)
	}
}

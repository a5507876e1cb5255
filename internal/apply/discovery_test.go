// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

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
` + appManifest

// Discovery is the cluster's, shared by every resource. A manifest that
// declares a CRD its identity may not write must not make each of its
// passes discover the whole cluster again, past the refresh's rate limit.
func TestADeclaredCRDThatWasNotWrittenDoesNotRefreshDiscovery(t *testing.T) {
	vr := engineVR("crds", crdManifest)
	f := newEngineFixture(t, []*v1alpha1.VidraResource{vr})
	refuse := func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, "widgets.example.com", errors.New("may not"))
	}
	for _, verb := range []string{"get", "patch"} {
		f.dynamic.PrependReactor(verb, "customresourcedefinitions", refuse)
		f.meta.PrependReactor(verb, "customresourcedefinitions", refuse)
	}
	if pass := f.apply(vr); len(pass.Out.Errs) == 0 {
		t.Fatal("the pass of a refused CRD succeeded, want it failed")
	}
	discoveries := func() int {
		n := 0
		for _, a := range f.discovery.Actions() {
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
		f.apply(vr)
	}
	if got := discoveries() - before; got != 0 {
		t.Errorf("3 more passes of a refused CRD made %d discovery requests, want 0", got)
	}
}

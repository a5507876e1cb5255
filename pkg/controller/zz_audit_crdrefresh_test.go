package controller

import (
	"context"
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

func TestAuditForbiddenCRDForcesDiscoveryRefreshEveryReconcile(t *testing.T) {
	for _, withCRD := range []bool{false, true} {
		manifest := configMapManifest
		if withCRD {
			manifest += "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\nspec: {}\n"
		}
		vr := newVR(operatorNS, "crd", manifest)
		f := newFixture(t, []*v1alpha1.VidraResource{vr})
		fd := f.kube.Discovery().(*fakediscovery.FakeDiscovery)
		fd.Resources = append(fd.Resources, &metav1.APIResourceList{GroupVersion: "apiextensions.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "customresourcedefinitions", Kind: "CustomResourceDefinition", Verbs: metav1.Verbs{"get", "list", "watch", "patch", "delete"}}}})
		f.dynamic.PrependReactor("patch", "customresourcedefinitions", func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, "things.example.com", nil)
		})
		key := cache.ObjectName{Namespace: operatorNS, Name: "crd"}
		_, _ = f.run(key)
		count := func() int {
			n := 0
			for _, a := range fd.Actions() {
				if r := a.GetResource().Resource; r == "resource" || r == "group" {
					n++
				}
			}
			return n
		}
		first := count()
		for range 5 {
			_, _ = f.c.sync(context.Background(), key)
		}
		if n := len(f.statuses); n > 0 { for _, c := range f.statuses[n-1].Conditions { if c.Type == "Ready" { t.Logf("Ready %s %s: %.200s", c.Status, c.Reason, c.Message) } } }
		t.Logf("manifest with CRD=%v: discovery requests after first reconcile %d, after 5 more (same clock second) %d", withCRD, first, count())
	}
}

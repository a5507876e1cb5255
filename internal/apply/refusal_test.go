// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/destination"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// What a resource acting as a ServiceAccount is told must not reveal what
// the operator, which may read more, knows: these tests refuse requests as
// the API server refuses deployer, and look at what the resource is told.

const deployer = "system:serviceaccount:team-a:deployer"

// localConfigMaps is the watch registry's reference to the local ConfigMaps.
var localConfigMaps = watchregistry.Ref{Cluster: destination.LocalCluster, GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}

// inNamespace moves a resource to ns.
func inNamespace(ns string) func(*v1alpha1.VidraResource) {
	return func(vr *v1alpha1.VidraResource) { vr.Namespace = ns }
}

// appIn is ConfigMap app of owner, in ns.
func appIn(ns string, owner *v1alpha1.VidraResource) *unstructured.Unstructured {
	u := appObject(owner)
	u.SetNamespace(ns)
	return u
}

// refuseVerbsIn answers the requests of verbs in namespace ns as the API
// server answers deployer, which may not make them.
func (f *engineFixture) refuseVerbsIn(ns string, verbs ...string) {
	refuse := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() != ns || !slices.Contains(verbs, a.GetVerb()) {
			return false, nil, nil
		}
		res := a.GetResource()
		var name string
		if n, ok := a.(interface{ GetName() string }); ok {
			name = n.GetName()
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: res.Group, Resource: res.Resource}, name,
			fmt.Errorf("User %q cannot %s resource %q in API group %q in the namespace %q", deployer, a.GetVerb(), res.Resource, res.Group, ns))
	}
	f.dynamic.PrependReactor("*", "*", refuse)
	f.meta.PrependReactor("*", "*", refuse)
}

// cacheConfigMapsOf starts the registry's informers with the ConfigMaps
// watched for vr, as its reconciles have them, and waits for them to
// sync. The fakes' reactors are set before: their chains are not safe to
// change while informers list and watch.
func (f *engineFixture) cacheConfigMapsOf(vr *v1alpha1.VidraResource) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	registry := f.engine.registry
	if err := registry.Start(ctx); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		cancel()
		<-registry.Done()
	})
	if err := registry.Track(cache.MetaObjectToName(vr), []watchregistry.Ref{localConfigMaps}); err != nil {
		f.t.Fatal(err)
	}
	if err := registry.WaitForSync(ctx, localConfigMaps); err != nil {
		f.t.Fatal(err)
	}
}

// applyAs runs one pass of vr on the local destination acting as
// ServiceAccount team-a/deployer.
func (f *engineFixture) applyAs(vr *v1alpha1.VidraResource) *Pass {
	target := *f.target
	target.ServiceAccount = "team-a/deployer"
	return f.engine.Apply(context.Background(), Input{VR: vr, Target: &target})
}

// A resource acting as a ServiceAccount that may do nothing in team-b is
// refused a name there alike, whether or not the operator's cache holds an
// object of that name (another resource's): the refusal in its status
// does not tell which names hold objects Vidra manages.
func TestARefusalDoesNotTellWhatTheOperatorsCacheHolds(t *testing.T) {
	other := engineVR("app", appManifest, inNamespace("team-b"), func(vr *v1alpha1.VidraResource) {
		// Its inventory declares the ConfigMap, so the cache holds it in
		// full, not as a stub.
		vr.Status.ManagedResources = []v1alpha1.ManagedResource{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-b", Name: "app"}}
	})
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-b\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nothing\n  namespace: team-b\n"
	tenant := engineVR("probe", manifest, inNamespace("team-a"))
	f := newEngineFixture(t, []*v1alpha1.VidraResource{other, tenant}, appIn("team-b", other))
	f.refuseVerbsIn("team-b", "get", "patch")
	f.cacheConfigMapsOf(other)
	if _, err := f.engine.registry.Get(localConfigMaps, "team-b", "app"); err != nil {
		t.Fatalf("the cache does not hold other's object: %v", err)
	}

	pass := f.applyAs(tenant)
	refusals := map[string]string{}
	for _, e := range pass.Out.Errs {
		refusals[e.Key.String()] = e.Error()
	}
	cached, absent := refusals["ConfigMap team-b/app"], refusals["ConfigMap team-b/nothing"]
	if !strings.Contains(absent, "cannot patch") {
		t.Fatalf("the absent name: %q, want the apply refused", absent)
	}
	want := strings.NewReplacer("nothing", "app", "(document 2)", "(document 1)").Replace(absent)
	if cached != want {
		t.Errorf("the name the cache holds is refused otherwise than the absent one:\n  %s\nwant\n  %s", cached, want)
	}
}

// A ServiceAccount that may read another resource's object, but not write
// it, is told whose it is, as kubectl would show it: the object is read as
// the ServiceAccount before anything else, and its claim is recorded for a
// hand-over.
func TestAServiceAccountThatMayReadSeesTheOwner(t *testing.T) {
	other := engineVR("app", appManifest, inNamespace("team-b"))
	tenant := engineVR("probe", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-b\n", inNamespace("team-a"))
	f := newEngineFixture(t, []*v1alpha1.VidraResource{other, tenant}, appIn("team-b", other))
	f.refuseVerbsIn("team-b", "patch")
	f.cacheConfigMapsOf(other)
	pass := f.applyAs(tenant)
	if len(pass.Out.Errs) != 1 || pass.Out.Errs[0].Reason != v1alpha1.ReasonOwnedByOther {
		t.Fatalf("errors %v, want one %s", pass.Out.Errs, v1alpha1.ReasonOwnedByOther)
	}
	if !strings.Contains(pass.Out.Errs[0].Error(), "team-b/app") {
		t.Errorf("error %q does not name the owner team-b/app", pass.Out.Errs[0].Error())
	}
}

// Deleting a resource whose manifest names objects in namespaces its
// ServiceAccount may not read reports them alike, whether or not their
// namespace is being deleted: that is asked as the operator, which may read
// namespaces, and only of objects the resource recorded as applied.
func TestCleanupDoesNotTellWhichForeignNamespacesAreBeingDeleted(t *testing.T) {
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: going\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: staying\n"
	tenant := engineVR("probe", manifest, inNamespace("team-a"))
	f := newEngineFixture(t, []*v1alpha1.VidraResource{tenant})
	now := metav1.Now()
	for _, ns := range []*metav1.PartialObjectMetadata{
		{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "going", DeletionTimestamp: &now, Finalizers: []string{"kubernetes"}}},
		{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "staying"}},
	} {
		if err := f.meta.Tracker().Add(ns); err != nil {
			t.Fatal(err)
		}
	}
	f.refuseVerbsIn("going", "get", "patch")
	f.refuseVerbsIn("staying", "get", "patch")
	target := *f.target
	target.ServiceAccount = "team-a/deployer"
	if _, err := f.engine.Cleanup(context.Background(), tenant, &target, true, true); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	events := strings.Join(f.events(), "\n")
	if !strings.Contains(events, "going/x") || !strings.Contains(events, "staying/x") {
		t.Errorf("Events:\n%s\nwant both objects reported alike as left as they are", events)
	}
}

// The API server refuses a ServiceAccount that does not exist as it
// refuses one without rights: the pass says which it is, asking as the
// operator, so that a person corrects spec.serviceAccountName rather than
// looks for a missing Role.
func TestAMissingServiceAccountIsNamedNotTakenForMissingRights(t *testing.T) {
	for _, exists := range []bool{false, true} {
		t.Run(fmt.Sprintf("ServiceAccount exists: %v", exists), func(t *testing.T) {
			tenant := engineVR("probe", appManifest, inNamespace("team-a"))
			f := newEngineFixture(t, []*v1alpha1.VidraResource{tenant})
			if exists {
				if err := f.meta.Tracker().Add(&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
					ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "deployer"}}); err != nil {
					t.Fatal(err)
				}
			}
			f.refuseVerbsIn("team-a", "get", "patch")
			// The operator itself may read ServiceAccounts.
			f.meta.PrependReactor("get", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
				obj, err := f.meta.Tracker().Get(serviceAccounts, a.GetNamespace(), a.(k8stesting.GetAction).GetName())
				return true, obj, err
			})
			pass := f.applyAs(tenant)
			f.engine.Finish(context.Background(), pass)
			want := v1alpha1.ReasonForbidden
			if !exists {
				want = v1alpha1.ReasonServiceAccountNotFound
			}
			if len(pass.Out.Errs) != 1 || pass.Out.Errs[0].Reason != want {
				t.Fatalf("errors %v, want one %s", pass.Out.Errs, want)
			}
		})
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

const deployer = "system:serviceaccount:team-a:deployer"

// refuseIn answers every get and patch of the fakes in namespace ns as the
// API server answers deployer, which has no right there.
func refuseIn(f *fixture, ns string) { refuseVerbsIn(f, ns, "get", "patch") }

// refuseVerbsIn answers the requests of verbs in namespace ns as the API
// server answers deployer, which may not make them.
func refuseVerbsIn(f *fixture, ns string, verbs ...string) {
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

// A resource acting as a ServiceAccount that may do nothing in team-b is
// refused a name there alike, whether or not the operator's cache holds an
// object of that name (another resource's): the refusal in its status
// does not tell which names hold objects Vidra manages.
func TestARefusalDoesNotTellWhatTheOperatorsCacheHolds(t *testing.T) {
	other := newVR("team-b", "app", configMapManifest)
	// Its inventory declares the ConfigMap, so the cache holds it in full,
	// not as a stub.
	other.Status.ManagedResources = appInventory("team-b")
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-b\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nothing\n  namespace: team-b\n"
	tenant := newVR("team-a", "probe", manifest)
	f := newFixture(t, []*v1alpha1.VidraResource{other, tenant}, liveApp("team-b", other))
	c := f.newController()
	f.c = c
	refuseIn(f, "team-b")
	ctx := startRegistry(t, c)
	// other's reconciles keep its ConfigMap in the operator's cache.
	if err := c.registry.Track(cache.MetaObjectToName(other), []watchregistry.Ref{configMapsRef}); err != nil {
		t.Fatal(err)
	}
	if err := c.registry.WaitForSync(ctx, configMapsRef); err != nil {
		t.Fatal(err)
	}
	if _, err := c.registry.Get(configMapsRef, "team-b", "app"); err != nil {
		t.Fatalf("the cache does not hold other's object: %v", err)
	}

	pass := c.engine.NewPass(tenant, nil)
	target := c.dests.Local()
	target.ServiceAccount = "team-a/deployer"
	pass.Target = target
	c.engine.Apply(context.Background(), pass)

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
	other := newVR("team-b", "app", configMapManifest)
	tenant := newVR("team-a", "probe", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: team-b\n")
	f := newFixture(t, []*v1alpha1.VidraResource{other, tenant}, liveApp("team-b", other))
	c := f.newController()
	f.c = c
	refuseVerbsIn(f, "team-b", "patch")
	ctx := startRegistry(t, c)
	if err := c.registry.Track(cache.MetaObjectToName(other), []watchregistry.Ref{configMapsRef}); err != nil {
		t.Fatal(err)
	}
	if err := c.registry.WaitForSync(ctx, configMapsRef); err != nil {
		t.Fatal(err)
	}
	pass := c.engine.NewPass(tenant, nil)
	target := c.dests.Local()
	target.ServiceAccount = "team-a/deployer"
	pass.Target = target
	c.engine.Apply(context.Background(), pass)
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
	tenant := newVR("team-a", "probe", manifest)
	f := newFixture(t, []*v1alpha1.VidraResource{tenant})
	now := metav1.Now()
	for _, ns := range []*metav1.PartialObjectMetadata{
		{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "going", DeletionTimestamp: &now, Finalizers: []string{"kubernetes"}}},
		{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: "staying"}},
	} {
		if err := f.meta.Tracker().Add(ns); err != nil {
			t.Fatal(err)
		}
	}
	c := f.newController()
	f.c = c
	refuseIn(f, "going")
	refuseIn(f, "staying")
	target := c.dests.Local()
	target.ServiceAccount = "team-a/deployer"
	if _, err := c.engine.Cleanup(context.Background(), tenant, target, true, true); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	events := strings.Join(f.events(), "\n")
	if !strings.Contains(events, "going/x") || !strings.Contains(events, "staying/x") {
		t.Errorf("Events:\n%s\nwant both objects reported alike as left as they are", events)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/fakeapply"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	vidrafake "github.com/vidra-operator/vidra/pkg/generated/clientset/versioned/fake"
	informers "github.com/vidra-operator/vidra/pkg/generated/informers/externalversions"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// The tests of the engine's behaviour run passes against fake clients, in
// the shape of pkg/controller's sync fixture: a fixture holds the fakes and
// what to preload into them; apply runs one pass of a resource; the case
// then looks at the pass's Outcome and at what the fakes were sent. They
// check the engine's decisions; what those do to a real cluster is the
// end-to-end tests' business.

const (
	// engineNS is the namespace of the resources and their objects.
	engineNS = "vidra-system"
	// engineAppliedRV is the resourceVersion the fake destination answers
	// applies with.
	engineAppliedRV = "100"
	// appManifest declares ConfigMap app.
	appManifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  key: value\n"
)

// engineFixture holds the fakes of one engine test.
type engineFixture struct {
	t        *testing.T
	dynamic  *dynamicfake.FakeDynamicClient
	meta     *metadatafake.FakeMetadataClient
	vidra    *vidrafake.Clientset
	recorder *record.FakeRecorder
	// discovery answers what the destination discovers.
	discovery *fakediscovery.FakeDiscovery
	engine    *Engine
	target    *destination.Target
	// partialView: the engine's caller sees some VidraResources only
	// (--watch-namespace, --shard-selector), so an owner it does not see
	// may exist.
	partialView bool

	mu sync.Mutex
	// actions are the requests sent to the destination's fakes, in the
	// order sent.
	actions []string
}

// newEngineFixture builds an engine as the operator does, on fakes: vrs
// are the VidraResources in the cluster Vidra runs in (all of them: an
// owner none of them is is gone), live the objects of the local
// destination. Applies succeed unless a case adds a reactor that answers
// otherwise. Requests are recorded from the start.
func newEngineFixture(t *testing.T, vrs []*v1alpha1.VidraResource, live ...runtime.Object) *engineFixture {
	f := &engineFixture{t: t, recorder: record.NewFakeRecorder(100)}
	clock := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	// Discovery alone: a fake clientset builds the type converter of every
	// built-in kind, seconds under -race, for nothing an engine test asks.
	disco := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: metav1.Verbs{"get", "list", "watch", "patch", "delete"}},
			{Name: "namespaces", Kind: "Namespace", Verbs: metav1.Verbs{"get", "list", "watch", "patch", "delete"}},
		},
	}, {
		GroupVersion: "apiextensions.k8s.io/v1",
		APIResources: []metav1.APIResource{
			{Name: "customresourcedefinitions", Kind: "CustomResourceDefinition", Verbs: metav1.Verbs{"get", "list", "watch", "patch", "delete"}},
		},
	}}}}
	f.discovery = disco
	var vrObjs []runtime.Object
	uids := map[types.UID]bool{}
	for _, vr := range vrs {
		vrObjs = append(vrObjs, vr)
		uids[vr.UID] = true
	}
	f.vidra = vidrafake.NewSimpleClientset(vrObjs...)
	f.dynamic = dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), live...)
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f.meta = metadatafake.NewSimpleMetadataClient(scheme)
	fakeapply.AnswerApplies(f.dynamic, f.meta, engineAppliedRV)
	f.recordRequests()

	registry, err := watchregistry.New(watchregistry.Options[cache.ObjectName]{
		LabelSelector: v1alpha1.ManagedByLabel + "=" + v1alpha1.ManagedByValue + "," + v1alpha1.OwnerUIDLabel,
		Map:           func(watchregistry.Event) []cache.ObjectName { return nil },
		Enqueue:       func(cache.ObjectName, watchregistry.Event) {},
		FieldManager:  v1alpha1.FieldManager,
		Clock:         clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	dests, err := destination.New(destination.Options{Dynamic: f.dynamic, Metadata: f.meta, Discovery: disco,
		Registry: registry, Clock: clock, Namespace: engineNS})
	if err != nil {
		t.Fatal(err)
	}
	f.target = dests.Local()
	owners := informers.NewSharedInformerFactory(f.vidra, 0).Infrahub().V1alpha1().VidraResources()
	for _, vr := range vrs {
		if err := owners.Informer().GetIndexer().Add(vr); err != nil {
			t.Fatal(err)
		}
	}
	f.engine = New(Options{Registry: registry, Owners: owners.Lister(), Vidra: f.vidra, Recorder: f.recorder, Clock: clock, Local: f.meta,
		Resources: func(uid types.UID) (exists, known bool) { return uids[uid], !f.partialView }})
	return f
}

// recordRequests records the requests to the destination's fakes, and to
// the VidraResources of the cluster Vidra runs in, in
// f.actions, as "verb resource namespace/name"; lists and watches, which
// informers send on their own schedule, are left out.
func (f *engineFixture) recordRequests() {
	record := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			return false, nil, nil
		}
		verb := a.GetVerb()
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetPatchType() == types.ApplyPatchType {
			verb = "apply"
		}
		name := ""
		if n, ok := a.(interface{ GetName() string }); ok {
			name = n.GetName()
		}
		f.mu.Lock()
		f.actions = append(f.actions, fmt.Sprintf("%s %s %s/%s", verb, a.GetResource().Resource, a.GetNamespace(), name))
		f.mu.Unlock()
		return false, nil, nil
	}
	f.dynamic.PrependReactor("*", "*", record)
	f.meta.PrependReactor("*", "*", record)
	f.vidra.PrependReactor("*", "*", record)
}

// apply runs one pass of vr on the local destination, as a reconcile does,
// with kubectl-edit as the hand-edit manager.
func (f *engineFixture) apply(vr *v1alpha1.VidraResource) *Pass {
	f.t.Helper()
	pass := f.engine.Apply(context.Background(), Input{VR: vr, OverrideManagers: []string{"kubectl-edit"}, Target: f.target})
	f.engine.Finish(context.Background(), pass)
	return pass
}

// requests returns the requests recorded so far.
func (f *engineFixture) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.actions...)
}

// engineVR is a VidraResource as the informer holds it after its creation.
func engineVR(name, manifest string, mutate ...func(*v1alpha1.VidraResource)) *v1alpha1.VidraResource {
	vr := &v1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: engineNS, Name: name, UID: types.UID(name + "-uid"), Generation: 1, ResourceVersion: "7",
			Finalizers: []string{v1alpha1.Finalizer},
		},
		Spec: v1alpha1.VidraResourceSpec{Manifest: manifest},
	}
	for _, m := range mutate {
		m(vr)
	}
	return vr
}

// inSyncStatus is the status of a resource of appManifest once a reconcile
// found its object in sync.
func inSyncStatus(vr *v1alpha1.VidraResource) {
	vr.Status = v1alpha1.VidraResourceStatus{
		ObservedGeneration: vr.Generation,
		ManagedResources:   []v1alpha1.ManagedResource{{APIVersion: "v1", Kind: "ConfigMap", Namespace: vr.Namespace, Name: "app", Health: "Current"}},
		ManagedCount:       1,
		InventoryCluster:   &v1alpha1.ClusterReference{},
	}
}

// appObject is the object of appManifest on the destination; owner, if
// set, is the VidraResource whose marks it carries, applied by Vidra.
func appObject(owner *v1alpha1.VidraResource) *unstructured.Unstructured {
	return fakeapply.AppConfigMap(engineNS, owner)
}

// events drains the Events recorded so far, as "Type Reason message".
func (f *engineFixture) events() []string { return fakeapply.DrainEvents(f.recorder) }

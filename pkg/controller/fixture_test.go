// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	restfake "k8s.io/client-go/rest/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/internal/config"
	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/fakeapply"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	vidrafake "github.com/vidra-operator/vidra/pkg/generated/clientset/versioned/fake"
	vidrascheme "github.com/vidra-operator/vidra/pkg/generated/clientset/versioned/scheme"
	informers "github.com/vidra-operator/vidra/pkg/generated/informers/externalversions"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// The fixture of the controller's tests: fake clients, the controller built
// over them as the operator builds it, the status writes it sends, and the
// resources and live objects the cases start from.

const (
	// operatorNS is the operator's namespace, and so the only trusted one.
	operatorNS = "vidra-system"
	// syncInterval is the periodic re-check, without jitter so that the
	// requeue decision can be compared exactly.
	syncInterval = 5 * time.Minute
	// appliedRV is the resourceVersion the fake destination answers applies
	// with.
	appliedRV = "100"
)

// statusPath is where a status write of a VidraResource goes.
func statusPath(ns, name string) string {
	return "/apis/" + v1alpha1.SchemeGroupVersion.String() + "/namespaces/" + ns + "/" + v1alpha1.ResourcePlural + "/" + name + "/status"
}

type fixture struct {
	t *testing.T

	kube     *k8sfake.Clientset
	vidra    *vidrafake.Clientset
	dynamic  *dynamicfake.FakeDynamicClient
	meta     *metadatafake.FakeMetadataClient
	recorder *record.FakeRecorder

	// vrs are preloaded into the informer's cache, the versioned fake and,
	// as metadata, the metadata fake, which receives finalizer patches.
	vrs []*v1alpha1.VidraResource
	// statusConflict refuses status writes with a 409, as when the
	// resource changed since the cache read it.
	statusConflict bool
	// watching has the watch registry watch the synced resource's objects
	// (ConfigMaps) before the sync, as an earlier reconcile would have.
	watching bool
	// beforeSync runs after the registry started and tracked, right
	// before the sync.
	beforeSync func()
	// reconcileTimeout is the controller's --reconcile-timeout; zero, none.
	reconcileTimeout time.Duration
	// partialView is the controller's Options.PartialView: its informer
	// holds some resources only.
	partialView bool
	// clock is the controller's, and the watch registry's.
	clock *clocktesting.FakeClock
	// startRegistry starts the watch registry before the sync, as the
	// controller's Run does; otherwise its informers never list.
	startRegistry bool
	// c is the controller of the last run.
	c *Controller

	mu sync.Mutex
	// actions are the requests sent to any fake, in the order sent.
	actions []string
	// statuses are the statuses written, in order.
	statuses []v1alpha1.VidraResourceStatus
}

// newFixture preloads vrs and the live objects of the local destination.
// Applies to the destination succeed unless a case adds a reactor that
// answers otherwise.
func newFixture(t *testing.T, vrs []*v1alpha1.VidraResource, live ...runtime.Object) *fixture {
	f := &fixture{t: t, vrs: vrs, recorder: record.NewFakeRecorder(100), clock: clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))}
	f.kube = k8sfake.NewClientset()
	f.kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: metav1.Verbs{"get", "list", "watch", "patch", "delete"}},
			{Name: "namespaces", Kind: "Namespace", Verbs: metav1.Verbs{"get", "list", "watch", "patch", "delete"}},
		},
	}}
	var vrObjs, metaObjs []runtime.Object
	for _, vr := range vrs {
		vrObjs = append(vrObjs, vr)
		metaObjs = append(metaObjs, &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "VidraResource"},
			ObjectMeta: *vr.ObjectMeta.DeepCopy(),
		})
	}
	f.vidra = vidrafake.NewSimpleClientset(vrObjs...)
	f.dynamic = dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), live...)
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	f.meta = metadatafake.NewSimpleMetadataClient(scheme, metaObjs...)
	// The object trackers have no server-side apply.
	fakeapply.AnswerApplies(f.dynamic, f.meta, appliedRV)
	return f
}

// newController builds the controller as production does, on the fakes,
// with the VidraResources in its informer's cache; the informer is not
// started.
func (f *fixture) newController() *Controller {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(f.vidra, 0)
	vrInformer := factory.Infrahub().V1alpha1().VidraResources()
	cfg := config.Default()
	cfg.RequeueAfter, cfg.Jitter = syncInterval, 0
	clients := Clients{Kube: f.kube, Vidra: f.vidra, Dynamic: f.dynamic, Metadata: f.meta, Discovery: f.kube.Discovery()}
	parts, err := NewParts(ctx, clients, vrInformer.Lister(), PartsOptions{
		Namespace:   operatorNS,
		Config:      func() *config.Config { return cfg },
		Recorder:    f.recorder,
		Clock:       f.clock,
		PartialView: f.partialView,
	})
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	c, err := NewController(ctx, clients, vrInformer, parts, Options{Recorder: f.recorder, ReconcileTimeout: f.reconcileTimeout})
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	for _, vr := range f.vrs {
		if err := vrInformer.Informer().GetIndexer().Add(vr); err != nil {
			f.t.Fatal(err)
		}
		// What the informer's handler does on the add.
		c.uids.add(vr)
	}
	c.status = &restfake.RESTClient{
		NegotiatedSerializer: vidrascheme.Codecs.WithoutConversion(),
		GroupVersion:         v1alpha1.SchemeGroupVersion,
		VersionedAPIPath:     "/apis/" + v1alpha1.SchemeGroupVersion.String(),
		Client:               restfake.CreateHTTPClient(f.serveStatus),
	}
	// Remote destinations start Secret informers under the Resolver's
	// context: give it one before the sync, and stop them afterwards.
	c.dests.Start(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.dests.Run(ctx)
	}()
	f.t.Cleanup(func() {
		cancel()
		<-done
		c.queue.ShutDown()
	})
	return c
}

// serveStatus answers the status writes of updateStatus, checking that the
// request is the one production sends: a PUT of the status subresource by
// Vidra's status field manager, asking for metadata alone in return.
func (f *fixture) serveStatus(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPut {
		f.t.Errorf("status write: method %s, want PUT", req.Method)
	}
	if got := req.URL.Query().Get("fieldManager"); got != v1alpha1.StatusFieldManager {
		f.t.Errorf("status write: fieldManager %q, want %q", got, v1alpha1.StatusFieldManager)
	}
	if got := req.Header.Get("Accept"); got != metadataOnly {
		f.t.Errorf("status write: Accept %q, want %q", got, metadataOnly)
	}
	var vr v1alpha1.VidraResource
	if err := json.NewDecoder(req.Body).Decode(&vr); err != nil {
		f.t.Errorf("status write: decode body: %v", err)
	}
	if want := statusPath(vr.Namespace, vr.Name); req.URL.Path != want {
		f.t.Errorf("status write: path %s, want %s", req.URL.Path, want)
	}
	f.mu.Lock()
	f.actions = append(f.actions, fmt.Sprintf("update %s/status %s/%s", v1alpha1.ResourcePlural, vr.Namespace, vr.Name))
	f.statuses = append(f.statuses, vr.Status)
	f.mu.Unlock()

	header := http.Header{"Content-Type": []string{"application/json"}}
	if f.statusConflict {
		body, _ := json.Marshal(apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourcePlural}, vr.Name, errors.New("the object has been modified")).Status())
		return &http.Response{StatusCode: http.StatusConflict, Header: header, Body: io.NopCloser(bytes.NewReader(body))}, nil
	}
	body, _ := json.Marshal(&metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{Namespace: vr.Namespace, Name: vr.Name, ResourceVersion: "2"},
	})
	return &http.Response{StatusCode: http.StatusOK, Header: header, Body: io.NopCloser(bytes.NewReader(body))}, nil
}

// startRegistry starts c's watch registry, as Run does, until the test
// ends; the context returned ends with it.
func startRegistry(t *testing.T, c *Controller) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.registry.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-c.registry.Done()
	})
	return ctx
}

// configMapsRef is the watch registry's reference to the local ConfigMaps.
var configMapsRef = watchregistry.Ref{Cluster: destination.LocalCluster, GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}}

// run syncs key once. The requests of every fake are recorded from here on,
// in one sequence, so that a case can say what came first.
func (f *fixture) run(key cache.ObjectName) (syncResult, error) {
	c := f.newController()
	f.c = c
	// Reactors first: the fakes' reactor chains are not safe to change
	// while the registry's informers list and watch.
	f.recordRequests()
	if f.startRegistry {
		startRegistry(f.t, c)
	}
	if f.watching {
		if err := c.registry.Track(key, []watchregistry.Ref{configMapsRef}); err != nil {
			f.t.Fatal(err)
		}
	}
	if f.beforeSync != nil {
		f.beforeSync()
	}
	return c.sync(context.Background(), key)
}

// recordRequests records, from here on, the requests of every fake in
// f.actions, as describe names them.
func (f *fixture) recordRequests() {
	record := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if d := describe(a); d != "" {
			f.mu.Lock()
			f.actions = append(f.actions, d)
			f.mu.Unlock()
		}
		return false, nil, nil
	}
	f.kube.PrependReactor("*", "*", record)
	f.vidra.PrependReactor("*", "*", record)
	f.dynamic.PrependReactor("*", "*", record)
	f.meta.PrependReactor("*", "*", record)
}

// describe names a request as a case expects it: verb, resource, object,
// and for a merge patch its body, which is the decision itself (the
// finalizer patches). Lists and watches are left out, as sample-controller
// does: informers send them on their own schedule. So are discovery's
// requests, which the RESTMapper makes when it needs them.
func describe(a k8stesting.Action) string {
	res := a.GetResource().Resource
	switch {
	case a.GetVerb() == "list", a.GetVerb() == "watch":
		return ""
	case a.GetResource().Group == "" && a.GetResource().Version == "" && (res == "group" || res == "resource" || res == "version"):
		return ""
	}
	if sub := a.GetSubresource(); sub != "" {
		res += "/" + sub
	}
	object := func(name string) string {
		if ns := a.GetNamespace(); ns != "" {
			return ns + "/" + name
		}
		return name
	}
	switch a := a.(type) {
	case k8stesting.PatchAction:
		switch a.GetPatchType() {
		case types.ApplyPatchType:
			return fmt.Sprintf("apply %s %s", res, object(a.GetName()))
		case types.MergePatchType:
			return fmt.Sprintf("patch %s %s %s", res, object(a.GetName()), a.GetPatch())
		default:
			return fmt.Sprintf("patch %s %s (%s)", res, object(a.GetName()), a.GetPatchType())
		}
	case k8stesting.DeleteAction:
		// Before GetAction, whose method set a delete has too.
		return fmt.Sprintf("delete %s %s", res, object(a.GetName()))
	case k8stesting.GetAction:
		return fmt.Sprintf("get %s %s", res, object(a.GetName()))
	}
	return fmt.Sprintf("%s %s", a.GetVerb(), res)
}

// watches reports whether the watch registry watches the local ConfigMaps
// for anyone: the fixture syncs one resource.
func (f *fixture) watches() bool {
	return f.c.registry.State(configMapsRef) != watchregistry.StateNotTracked
}

// events drains the Events recorded so far.
func (f *fixture) events() []string { return fakeapply.DrainEvents(f.recorder) }

// finalizerPatch is the merge patch that sets a VidraResource's finalizers,
// guarded by the resourceVersion read; none removes the field.
func finalizerPatch(vr *v1alpha1.VidraResource, finalizers ...string) string {
	list := "null"
	if len(finalizers) > 0 {
		list = `["` + strings.Join(finalizers, `","`) + `"]`
	}
	return fmt.Sprintf(`patch %s %s/%s {"metadata":{"finalizers":%s,"resourceVersion":"%s"}}`,
		v1alpha1.ResourcePlural, vr.Namespace, vr.Name, list, vr.ResourceVersion)
}

const (
	configMapManifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  key: value\n"
	// badManifest's second document has no kind.
	badManifest = configMapManifest + "---\napiVersion: v1\nmetadata:\n  name: other\n"
)

// newVR is a VidraResource as the informer holds it after its creation,
// with Vidra's finalizer unless mutate removes it.
func newVR(ns, name, manifest string, mutate ...func(*v1alpha1.VidraResource)) *v1alpha1.VidraResource {
	vr := &v1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, UID: types.UID(name + "-uid"), Generation: 1, ResourceVersion: "7",
			Finalizers: []string{v1alpha1.Finalizer},
		},
		Spec: v1alpha1.VidraResourceSpec{Manifest: manifest},
	}
	for _, m := range mutate {
		m(vr)
	}
	return vr
}

func withoutFinalizer(vr *v1alpha1.VidraResource) { vr.Finalizers = nil }

func suspended(vr *v1alpha1.VidraResource) { vr.Spec.Suspend = true }

// proxyPath is a spec.destination.namespace that would make a request's
// path that of a service's proxy.
const proxyPath = "kube-system/services/https:metrics-server:443/proxy/x"

func toNamespace(ns string) func(*v1alpha1.VidraResource) {
	return func(vr *v1alpha1.VidraResource) { vr.Spec.Destination.Namespace = ns }
}

func deleting(vr *v1alpha1.VidraResource) {
	vr.DeletionTimestamp = &metav1.Time{Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// reportedSuspended is the status a suspended resource has once its
// suspension was reported.
func reportedSuspended(vr *v1alpha1.VidraResource) {
	vr.Status.ObservedGeneration = vr.Generation
	vr.Status.DeployState = v1alpha1.DeployStateStale
	vr.Status.Conditions = []metav1.Condition{{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonSuspended,
		Message:            "Reconciliation is suspended (spec.suspend); drift is not corrected",
		ObservedGeneration: vr.Generation, LastTransitionTime: metav1.NewTime(time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)),
	}}
}

// appInventory is the inventory of configMapManifest applied in namespace.
func appInventory(namespace string) []v1alpha1.ManagedResource {
	return []v1alpha1.ManagedResource{{APIVersion: "v1", Kind: "ConfigMap", Namespace: namespace, Name: "app"}}
}

// reportedInSync is the status a resource of configMapManifest has once a
// reconcile found its object in sync.
func reportedInSync(vr *v1alpha1.VidraResource) {
	since := metav1.NewTime(time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC))
	inventory := appInventory(vr.Namespace)
	for i := range inventory {
		inventory[i].Health = "Current"
	}
	vr.Status = v1alpha1.VidraResourceStatus{
		ObservedGeneration:   vr.Generation,
		DeployState:          v1alpha1.DeployStateSucceeded,
		ManagedResources:     inventory,
		ManagedCount:         1,
		InventoryCluster:     &v1alpha1.ClusterReference{},
		HealthCheckStartTime: &since,
		Conditions: []metav1.Condition{{
			Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReconciled,
			Message: "1 object applied and in sync", ObservedGeneration: vr.Generation, LastTransitionTime: since,
		}, {
			Type: v1alpha1.ConditionHealthy, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAllCurrent,
			Message: "1 object healthy", ObservedGeneration: vr.Generation, LastTransitionTime: since,
		}},
	}
}

// liveApp is the object of configMapManifest on the destination; owner, if
// set, is the VidraResource whose marks it carries.
func liveApp(namespace string, owner *v1alpha1.VidraResource) *unstructured.Unstructured {
	return fakeapply.AppConfigMap(namespace, owner)
}

// cond is a condition as a case expects it.
type cond struct {
	typ    string
	status metav1.ConditionStatus
	reason string
}

// wantStatus is the one status write a case expects.
type wantStatus struct {
	// conditions are all the conditions, in any order.
	conditions  []cond
	deployState v1alpha1.DeployState
	managed     int
	// readyMessage is part of the Ready condition's message.
	readyMessage string
}

func (w *wantStatus) check(t *testing.T, st v1alpha1.VidraResourceStatus) {
	t.Helper()
	var got []cond
	for _, c := range st.Conditions {
		got = append(got, cond{c.Type, c.Status, c.Reason})
	}
	slices.SortFunc(got, func(a, b cond) int { return strings.Compare(a.typ, b.typ) })
	want := slices.Clone(w.conditions)
	slices.SortFunc(want, func(a, b cond) int { return strings.Compare(a.typ, b.typ) })
	if !slices.Equal(got, want) {
		t.Errorf("conditions written %+v, want %+v", got, want)
	}
	if st.DeployState != w.deployState {
		t.Errorf("deployState written %q, want %q", st.DeployState, w.deployState)
	}
	if int(st.ManagedCount) != w.managed || len(st.ManagedResources) != w.managed {
		t.Errorf("inventory written %v (count %d), want %d objects", st.ManagedResources, st.ManagedCount, w.managed)
	}
	if ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); ready != nil && !strings.Contains(ready.Message, w.readyMessage) {
		t.Errorf("Ready message %q does not say %q", ready.Message, w.readyMessage)
	}
}

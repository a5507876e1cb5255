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
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
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
	"github.com/vidra-operator/vidra/internal/shard"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	vidrafake "github.com/vidra-operator/vidra/pkg/generated/clientset/versioned/fake"
	vidrascheme "github.com/vidra-operator/vidra/pkg/generated/clientset/versioned/scheme"
	informers "github.com/vidra-operator/vidra/pkg/generated/informers/externalversions"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

func TestPreviousDestination(t *testing.T) {
	secret := &v1alpha1.SecretKeyReference{Name: "kc", Key: "kubeconfig"}
	inventory := []v1alpha1.ManagedResource{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "a"}}
	for _, tc := range []struct {
		name      string
		dest      v1alpha1.Destination
		recorded  *v1alpha1.ClusterReference
		inventory []v1alpha1.ManagedResource
		moved     bool
	}{
		{"no cluster recorded: the current one", v1alpha1.Destination{Server: "https://remote:6443", KubeconfigSecretRef: secret}, nil, inventory, false},
		{"local, both ways of saying it", v1alpha1.Destination{Server: "https://kubernetes.default.svc"}, &v1alpha1.ClusterReference{}, inventory, false},
		{"same remote", v1alpha1.Destination{Server: "https://remote:6443", KubeconfigSecretRef: secret}, &v1alpha1.ClusterReference{Server: "https://remote:6443", KubeconfigSecretRef: secret}, inventory, false},
		{"local to remote", v1alpha1.Destination{Server: "https://remote:6443", KubeconfigSecretRef: secret}, &v1alpha1.ClusterReference{}, inventory, true},
		{"another Secret", v1alpha1.Destination{Server: "https://remote:6443", KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "other"}}, &v1alpha1.ClusterReference{Server: "https://remote:6443", KubeconfigSecretRef: secret}, inventory, true},
		{"moved with nothing to clean up", v1alpha1.Destination{Server: "https://remote:6443"}, &v1alpha1.ClusterReference{}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vr := &v1alpha1.VidraResource{Spec: v1alpha1.VidraResourceSpec{Destination: tc.dest},
				Status: v1alpha1.VidraResourceStatus{InventoryCluster: tc.recorded, ManagedResources: tc.inventory}}
			old, moved := previousDestination(vr)
			if moved != tc.moved {
				t.Fatalf("moved = %v, want %v", moved, tc.moved)
			}
			if moved && !equality.Semantic.DeepEqual(destinationRef(old), tc.recorded) {
				t.Fatalf("previous destination %+v, want %+v", old.Spec.Destination, tc.recorded)
			}
			if !equality.Semantic.DeepEqual(vr.Spec.Destination, tc.dest) {
				t.Fatalf("the resource was changed: %+v", vr.Spec.Destination)
			}
		})
	}
}

// The tests below run one sync against fake clients, in the manner of
// k8s.io/sample-controller's controller_test.go: a fixture holds the fakes
// and what to preload into the informer cache and the trackers; run syncs
// one key; the case then compares what was sent, in order, to every fake,
// the status written, the Events and what sync decided. They check the
// decisions of one reconcile; what those decisions do to a real cluster is
// the end-to-end tests' business.

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
	// The object tracker has no server-side apply of metadata: answer as
	// the API server does, with the applied object's metadata.
	f.meta.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		if p.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		return true, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Namespace: p.GetNamespace(), Name: p.GetName(), ResourceVersion: appliedRV}}, nil
	})
	// Nor of whole objects, which a creation asks for: answer with the
	// applied object.
	f.dynamic.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		if p.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(p.GetPatch()); err != nil {
			return true, nil, err
		}
		u.SetResourceVersion(appliedRV)
		return true, u, nil
	})
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
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

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
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": namespace, "name": "app", "uid": "app-uid", "resourceVersion": "42"},
		"data":     map[string]any{"key": "value"},
	}}
	if owner != nil {
		u.SetLabels(map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue, v1alpha1.OwnerUIDLabel: string(owner.UID),
			v1alpha1.BucketLabel: shard.BucketLabel(cache.MetaObjectToName(owner))})
		u.SetAnnotations(map[string]string{v1alpha1.OwnedByAnnotation: owner.Namespace + "/" + owner.Name})
		// Vidra's apply wrote it, as it wrote every object it manages.
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply}})
	}
	return u
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

// TestSyncDecisions runs one sync per case and compares what it decided:
// the requests it sent and in which order, the status it wrote, the Events
// it recorded, when it asked to come back, and whether it asked for a retry.
// A reconcile whose objects' cache is still listing, as at startup or
// after a rebalance, waits for the list rather than reading each object
// from the API server: the object is then read from the cache (no get).
func TestReadsWaitForACacheStillListing(t *testing.T) {
	// As "a reconcile that changes nothing writes nothing" in
	// TestSyncDecisions, whose registry does not run and so reads the
	// object with a get.
	vr := newVR(operatorNS, "steady", configMapManifest, reportedInSync)
	f := newFixture(t, []*v1alpha1.VidraResource{vr}, liveApp(operatorNS, newVR(operatorNS, "steady", "")))
	f.startRegistry = true
	if _, err := f.run(cache.MetaObjectToName(vr)); err != nil {
		t.Fatalf("sync: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.actions) > 0 || len(f.statuses) > 0 {
		t.Errorf("requests sent: %q, want none: the object read from the cache once listed, and found in sync", f.actions)
	}
	if !f.c.registry.Synced(configMapsRef) {
		t.Errorf("the ConfigMaps' cache is %s, want Synced", f.c.registry.State(configMapsRef))
	}
}

// A list that keeps failing is waited for once, for cacheSyncWait from the
// informer's start, not at every reconcile: past that, a reconcile reads
// from the API server at once and holds no worker.
func TestReadsDoNotWaitForAListThatKeepsFailing(t *testing.T) {
	vr := newVR(operatorNS, "steady", configMapManifest, reportedInSync)
	f := newFixture(t, []*v1alpha1.VidraResource{vr}, liveApp(operatorNS, newVR(operatorNS, "steady", "")))
	f.startRegistry, f.watching = true, true
	f.dynamic.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("conversion webhook unavailable"))
	})
	// The informer starts as the fixture tracks the objects; the reconcile
	// comes longer than the wait after that.
	f.beforeSync = func() { f.clock.Step(11 * time.Second) }
	done := make(chan error, 1)
	go func() {
		_, err := f.run(cache.MetaObjectToName(vr))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sync: %v", err)
		}
	case <-time.After(5 * time.Second):
		// The wait would be 10 s; the sync itself takes milliseconds.
		t.Fatal("the sync waited for a list that keeps failing")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(f.actions, []string{"get configmaps vidra-system/app"}) {
		t.Errorf("requests sent: %q, want the object read from the API server", f.actions)
	}
}

func TestSyncDecisions(t *testing.T) {
	remote := func(vr *v1alpha1.VidraResource) {
		vr.Spec.Destination = v1alpha1.Destination{
			Server: "https://remote.example:6443", KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "remote-kubeconfig"},
		}
		vr.Status.InventoryCluster = destinationRef(vr)
	}
	interval := syncResult{requeueAfter: syncInterval, requeueTrigger: TriggerInterval}
	const (
		noError = iota
		retry
		conflict
	)

	for _, tc := range []struct {
		name string
		// vr is the resource synced; nil syncs a key the cache does not hold.
		vr   *v1alpha1.VidraResource
		live []runtime.Object
		// react adds the fakes' answers beyond their trackers'.
		react func(f *fixture)
		// statusConflict refuses status writes with a 409.
		statusConflict bool
		// reconcileTimeout is the controller's --reconcile-timeout.
		reconcileTimeout time.Duration
		// watching has the resource's objects watched before the sync.
		watching bool

		wantActions []string
		// wantStatus is the one status write expected; nil expects none.
		wantStatus *wantStatus
		// wantEvents are prefixes ("Type Reason message") of the Events.
		wantEvents []string
		wantResult syncResult
		wantErr    int
		// wantWatching says whether the resource's objects are watched
		// after the sync.
		wantWatching bool
	}{
		{
			name:     "a deleted resource is forgotten, its watches released, and nothing is written",
			watching: true,
		},
		{
			name:        "a new resource gets the finalizer, guarded by its resourceVersion, before anything is applied",
			vr:          newVR(operatorNS, "new", configMapManifest, withoutFinalizer),
			wantActions: []string{finalizerPatch(newVR(operatorNS, "new", ""), v1alpha1.Finalizer), "get configmaps vidra-system/app", "apply configmaps vidra-system/app", "update vidraresources/status vidra-system/new"},
			wantStatus: &wantStatus{
				conditions:  []cond{{v1alpha1.ConditionHealthy, metav1.ConditionTrue, v1alpha1.ReasonAllCurrent}, {v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled}},
				deployState: v1alpha1.DeployStateSucceeded, managed: 1, readyMessage: "1 object applied and in sync",
			},
			wantResult:   interval,
			wantWatching: true,
		},
		{
			name: "a finalizer patch on a stale read fails with a conflict, and nothing else is done",
			vr:   newVR(operatorNS, "stale", configMapManifest, withoutFinalizer),
			react: func(f *fixture) {
				f.meta.PrependReactor("patch", v1alpha1.ResourcePlural, func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourcePlural}, "stale", errors.New("the object has been modified"))
				})
			},
			wantActions: []string{finalizerPatch(newVR(operatorNS, "stale", ""), v1alpha1.Finalizer)},
			wantErr:     conflict,
		},
		{
			name:        "a suspended resource reports Ready=False Suspended, stops its watches and applies nothing",
			vr:          newVR(operatorNS, "paused", configMapManifest, suspended),
			watching:    true,
			wantActions: []string{"update vidraresources/status vidra-system/paused"},
			wantStatus: &wantStatus{
				conditions:  []cond{{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSuspended}},
				deployState: v1alpha1.DeployStateStale, readyMessage: "spec.suspend",
			},
			wantEvents: []string{"Normal Suspended Reconciliation suspended"},
		},
		{
			name:     "a suspended resource that says so already writes nothing",
			vr:       newVR(operatorNS, "paused", configMapManifest, suspended, reportedSuspended),
			watching: true,
		},
		{
			name:        "a resource of an untrusted namespace that names no ServiceAccount stalls with ServiceAccountRequired, contacts nothing, and waits for the interval",
			vr:          newVR("tenant", "untrusted", configMapManifest),
			wantActions: []string{"update vidraresources/status tenant/untrusted"},
			wantStatus: &wantStatus{
				conditions: []cond{
					{v1alpha1.ConditionHealthy, metav1.ConditionUnknown, v1alpha1.ReasonNothingApplied},
					{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonServiceAccountRequired},
					{v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonServiceAccountRequired},
				},
				deployState: v1alpha1.DeployStateFailed, readyMessage: "namespace tenant is not trusted",
			},
			wantEvents: []string{"Warning ServiceAccountRequired nothing applied: namespace tenant is not trusted"},
			wantResult: interval,
		},
		{
			name:        "a manifest that does not parse is reported with its document, applies nothing, and is not retried",
			vr:          newVR(operatorNS, "broken", badManifest),
			wantActions: []string{"update vidraresources/status vidra-system/broken"},
			wantStatus: &wantStatus{
				conditions: []cond{
					{v1alpha1.ConditionHealthy, metav1.ConditionUnknown, v1alpha1.ReasonNothingApplied},
					{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidManifest},
					{v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidManifest},
				},
				deployState: v1alpha1.DeployStateFailed, readyMessage: "document 2 (line 8): kind: required",
			},
			wantEvents: []string{"Warning InvalidManifest document 2 (line 8): kind: required"},
			wantResult: interval,
		},
		{
			name:         "a reconcile that changes nothing writes nothing",
			vr:           newVR(operatorNS, "steady", configMapManifest, reportedInSync),
			live:         []runtime.Object{liveApp(operatorNS, newVR(operatorNS, "steady", ""))},
			wantActions:  []string{"get configmaps vidra-system/app"},
			wantResult:   interval,
			wantWatching: true,
		},
		{
			name:        "an object that exists without Vidra's marks is a conflict, not taken over, and retried with backoff",
			vr:          newVR(operatorNS, "blocked", configMapManifest),
			live:        []runtime.Object{liveApp(operatorNS, nil)},
			wantActions: []string{"get configmaps vidra-system/app", "update vidraresources/status vidra-system/blocked"},
			wantStatus: &wantStatus{
				conditions: []cond{
					{v1alpha1.ConditionHealthy, metav1.ConditionUnknown, v1alpha1.ReasonNothingApplied},
					{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonUnmanagedExists},
					{v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonUnmanagedExists},
					{v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProgressing},
					{v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonUnmanagedExists},
				},
				deployState: v1alpha1.DeployStateFailed, readyMessage: "exists and is not managed by Vidra",
			},
			wantEvents: []string{"Warning Conflict ConfigMap vidra-system/app (document 1): exists and is not managed by Vidra"},
			wantResult: syncResult{requeueAfter: syncInterval, requeueTrigger: TriggerInterval, conflict: true},
			wantErr:    retry,
			// Nothing of its kind was written, and the inventory holds
			// none: no informer starts for it.
			wantWatching: false,
		},
		{
			name: "an apply the API server fails is reported as Running and retried with backoff",
			vr:   newVR(operatorNS, "flaky", configMapManifest),
			react: func(f *fixture) {
				f.dynamic.PrependReactor("patch", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewInternalError(errors.New("etcd leader changed"))
				})
			},
			wantActions: []string{"get configmaps vidra-system/app", "apply configmaps vidra-system/app", "update vidraresources/status vidra-system/flaky"},
			wantStatus: &wantStatus{
				conditions: []cond{
					{v1alpha1.ConditionHealthy, metav1.ConditionUnknown, v1alpha1.ReasonNothingApplied},
					{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed},
					{v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProgressing},
				},
				deployState: v1alpha1.DeployStateRunning, readyMessage: "etcd leader changed",
			},
			wantEvents: []string{"Warning ApplyFailed ConfigMap vidra-system/app (document 1): "},
			wantResult: interval,
			wantErr:    retry,
			// Its only apply failed: no informer starts for its kind.
			wantWatching: false,
		},
		{
			name:           "a status write that lost a race is returned as a conflict, to be retried",
			vr:             newVR(operatorNS, "raced", configMapManifest),
			statusConflict: true,
			wantActions:    []string{"get configmaps vidra-system/app", "apply configmaps vidra-system/app", "update vidraresources/status vidra-system/raced"},
			wantStatus: &wantStatus{
				conditions:  []cond{{v1alpha1.ConditionHealthy, metav1.ConditionTrue, v1alpha1.ReasonAllCurrent}, {v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled}},
				deployState: v1alpha1.DeployStateSucceeded, managed: 1,
			},
			wantResult:   interval,
			wantErr:      conflict,
			wantWatching: true,
		},
		{
			name:     "deleting a resource with nothing recorded as applied checks for the objects its manifest declares, stops its watches, then removes the finalizer",
			vr:       newVR(operatorNS, "gone", configMapManifest, deleting),
			watching: true,
			// No namespace read: whether a namespace is being deleted is
			// asked as the operator, so only for recorded objects.
			wantActions: []string{
				"get configmaps vidra-system/app",
				finalizerPatch(newVR(operatorNS, "gone", "")),
			},
			wantEvents: []string{"Normal Deleted Deleted 0 managed objects"},
		},
		{
			name:        "a destination namespace that is not a namespace name is refused before any request",
			vr:          newVR(operatorNS, "proxied", configMapManifest, toNamespace(proxyPath)),
			wantActions: []string{"update vidraresources/status vidra-system/proxied"},
			wantStatus: &wantStatus{
				conditions: []cond{
					{v1alpha1.ConditionHealthy, metav1.ConditionUnknown, v1alpha1.ReasonNothingApplied},
					{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidManifest},
					{v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidManifest},
				},
				deployState: v1alpha1.DeployStateFailed, readyMessage: "spec.destination.namespace: \"kube-system/services/",
			},
			wantEvents: []string{"Warning InvalidManifest spec.destination.namespace: \"kube-system/services/"},
			wantResult: interval,
		},
		{
			// The namespace would be a segment of the path of the request
			// that asks whether it is being deleted, made as the operator.
			name:        "deleting a resource whose destination namespace is not a namespace name asks for nothing at that path",
			vr:          newVR(operatorNS, "proxied", configMapManifest, toNamespace(proxyPath), deleting),
			wantActions: []string{finalizerPatch(newVR(operatorNS, "proxied", ""))},
			wantEvents:  []string{"Normal Deleted Deleted 0 managed objects"},
		},
		{
			name: "a deletion that runs out of the reconcile's time keeps the finalizer, says how far it got, and is retried",
			vr: newVR(operatorNS, "slow", configMapManifest, deleting, func(vr *v1alpha1.VidraResource) {
				vr.Status.ManagedResources, vr.Status.ManagedCount = appInventory(operatorNS), 1
			}),
			// Out of time before the first object.
			reconcileTimeout: time.Nanosecond,
			wantActions:      []string{"update vidraresources/status vidra-system/slow"},
			wantStatus: &wantStatus{
				conditions: []cond{{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDeleting}, {v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonDeleting}},
				managed:    1,
				readyMessage: "Cleaning up managed objects is not finished, retrying with backoff: " +
					"the reconcile ran out of its time (1ns, --reconcile-timeout); 1 of 1 object left to look at",
			},
			wantEvents: []string{"Warning CleanupFailed Cleaning up managed objects is not finished"},
			wantErr:    retry,
		},
		{
			name: "an Orphan deletion that runs out of the reconcile's time keeps the finalizer too, so that no object keeps Vidra's marks",
			vr: newVR(operatorNS, "slow-orphan", configMapManifest, deleting, func(vr *v1alpha1.VidraResource) {
				vr.Spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan
				vr.Status.ManagedResources, vr.Status.ManagedCount = appInventory(operatorNS), 1
			}),
			reconcileTimeout: time.Nanosecond,
			wantActions:      []string{"update vidraresources/status vidra-system/slow-orphan"},
			wantStatus: &wantStatus{
				conditions:   []cond{{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDeleting}, {v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonDeleting}},
				managed:      1,
				readyMessage: "Cleaning up managed objects is not finished",
			},
			wantEvents: []string{"Warning CleanupFailed Cleaning up managed objects is not finished"},
			wantErr:    retry,
		},
		{
			name: "deleting with Orphan when the remote destination's Secret is gone removes the finalizer and names what is left behind",
			vr: newVR(operatorNS, "stranded", configMapManifest, deleting, remote, func(vr *v1alpha1.VidraResource) {
				vr.Spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan
				vr.Status.ManagedResources = appInventory("apps")
			}),
			wantActions: []string{finalizerPatch(newVR(operatorNS, "stranded", ""))},
			wantEvents: []string{
				"Warning LeftBehind Finalizer removed without cleanup, the destination's credentials are gone: Secret vidra-system/remote-kubeconfig named by destination.kubeconfigSecretRef does not exist; " +
					"left behind on https://remote.example:6443: ConfigMap apps/app",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := cache.ObjectName{Namespace: operatorNS, Name: "deleted"}
			var vrs []*v1alpha1.VidraResource
			if tc.vr != nil {
				key = cache.MetaObjectToName(tc.vr)
				vrs = append(vrs, tc.vr)
			}
			f := newFixture(t, vrs, tc.live...)
			f.statusConflict, f.watching, f.reconcileTimeout = tc.statusConflict, tc.watching, tc.reconcileTimeout
			if tc.react != nil {
				tc.react(f)
			}

			res, err := f.run(key)

			switch {
			case tc.wantErr == noError && err != nil:
				t.Errorf("sync returned %v, want no error (no retry)", err)
			case tc.wantErr == retry && err == nil:
				t.Errorf("sync returned no error, want one to retry with backoff")
			case tc.wantErr == conflict && !apierrors.IsConflict(err):
				t.Errorf("sync returned %v, want a conflict", err)
			}
			if res != tc.wantResult {
				t.Errorf("sync result %+v, want %+v", res, tc.wantResult)
			}
			f.mu.Lock()
			actions, statuses := f.actions, f.statuses
			f.mu.Unlock()
			if !slices.Equal(actions, tc.wantActions) {
				t.Errorf("requests sent:\n  %s\nwant:\n  %s", strings.Join(actions, "\n  "), strings.Join(tc.wantActions, "\n  "))
			}
			switch {
			case tc.wantStatus == nil && len(statuses) > 0:
				t.Errorf("status written %+v, want no status write", statuses)
			case tc.wantStatus != nil && len(statuses) != 1:
				t.Errorf("%d status writes, want 1", len(statuses))
			case tc.wantStatus != nil:
				tc.wantStatus.check(t, statuses[0])
			}
			if got := f.watches(); got != tc.wantWatching {
				t.Errorf("objects watched after the sync: %v, want %v", got, tc.wantWatching)
			}
			events := f.events()
			if len(events) != len(tc.wantEvents) {
				t.Errorf("Events recorded:\n  %s\nwant:\n  %s", strings.Join(events, "\n  "), strings.Join(tc.wantEvents, "\n  "))
			} else {
				for i := range events {
					if !strings.HasPrefix(events[i], tc.wantEvents[i]) {
						t.Errorf("Event %q, want one starting %q", events[i], tc.wantEvents[i])
					}
				}
			}
		})
	}
}

// After a rebalance or a start, a resource with an object missing (deleted
// while no replica served it, or while the operator was down) is
// reconciled before the intact ones are verified: each intact resource is
// put off once, with no request, behind the rest, then verified.
func TestRebalanceAndStartRestoreMissingObjectsFirst(t *testing.T) {
	for _, trigger := range []Trigger{TriggerRebalance, TriggerStartup} {
		t.Run(string(trigger), func(t *testing.T) { testMissingObjectsFirst(t, trigger) })
	}
}

func testMissingObjectsFirst(t *testing.T, trigger Trigger) {
	intact := newVR(operatorNS, "intact", configMapManifest, reportedInSync)
	// broken's ConfigMap, other, is gone.
	broken := newVR(operatorNS, "broken", strings.Replace(configMapManifest, "name: app", "name: other", 1), reportedInSync,
		func(vr *v1alpha1.VidraResource) { vr.Status.ManagedResources[0].Name = "other" })
	f := newFixture(t, []*v1alpha1.VidraResource{intact, broken}, liveApp(operatorNS, intact))
	c := f.newController()
	f.c = c
	f.recordRequests()
	startRegistry(t, c)
	var order []string
	c.opts.OnReconcile = func(key cache.ObjectName, _ Trigger, result string) {
		order = append(order, key.Name+" "+result)
	}
	// The ConfigMaps' informer lists first, and its list wakes intact, the
	// owner of the object it found, as at startup. Waited for here, so that
	// the wake is not taken for a second putting off when it comes late.
	ctx := t.Context()
	if err := c.registry.Track(cache.MetaObjectToName(intact), []watchregistry.Ref{configMapsRef}); err != nil {
		t.Fatal(err)
	}
	if err := c.registry.WaitForSync(ctx, configMapsRef); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return c.queue.Len() == 1, nil
	}); err != nil {
		t.Fatalf("the first list woke nobody: %v", err)
	}
	// As ShardChanged, or the informers' first lists, queue them; the
	// intact resource first.
	c.enqueue(cache.MetaObjectToName(intact), trigger)
	c.enqueue(cache.MetaObjectToName(broken), trigger)
	for i := 0; i < 3 && c.queue.Len() > 0; i++ {
		c.processNextWorkItem(context.Background())
	}
	if want := []string{"broken success", "intact success"}; !slices.Equal(order, want) {
		t.Errorf("reconciles %q, want %q: the resource missing its object first", order, want)
	}
	if n := c.queue.Len(); n != 0 {
		t.Errorf("%d keys still queued, want none: a resource is put off once", n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := []string{"apply configmaps vidra-system/other", "update vidraresources/status vidra-system/broken"}; !slices.Equal(f.actions, want) {
		t.Errorf("requests sent: %q, want %q: the missing object restored, the intact one read from the cache", f.actions, want)
	}
}

// A deletion that runs out of the reconcile's time keeps in the inventory
// only what it did not get to: objects found gone are dropped, so that
// each try gets further, however many objects one try's time allows.
//
// The reconcile's deadline is a timer of the time package. In a synctest
// bubble, time moves only while every goroutine of the test waits: the
// reads take no time at all but the looked-th, which outlasts the
// reconcile's whole time. When it returns, the deadline has passed and the
// reconcile's context is cancelled, whatever the machine's load: the
// deletion stops right after it.
func TestDeletionOutOfTimeKeepsOnlyWhatIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const objects, looked = 8, 3
		vr := newVR(operatorNS, "many", "", deleting, func(vr *v1alpha1.VidraResource) {
			for i := range objects {
				vr.Status.ManagedResources = append(vr.Status.ManagedResources,
					v1alpha1.ManagedResource{APIVersion: "v1", Kind: "ConfigMap", Namespace: operatorNS, Name: fmt.Sprintf("gone-%d", i)})
			}
			vr.Status.ManagedCount = objects
		})
		f := newFixture(t, []*v1alpha1.VidraResource{vr})
		// The objects are all gone already; the last read of the try is
		// the looked-th.
		f.reconcileTimeout = time.Minute
		reads := 0
		f.meta.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
			if reads++; reads == looked {
				time.Sleep(f.reconcileTimeout + time.Second)
			}
			return false, nil, nil
		})
		if _, err := f.run(cache.MetaObjectToName(vr)); err == nil {
			t.Fatal("sync returned no error, want one to retry with backoff")
		}
		if reads != looked {
			t.Errorf("%d objects read, want %d: the try stops once its time is up", reads, looked)
		}
		f.mu.Lock()
		statuses := f.statuses
		f.mu.Unlock()
		if len(statuses) != 1 {
			t.Fatalf("%d status writes, want 1", len(statuses))
		}
		left := statuses[0].ManagedResources
		if want := vr.Status.ManagedResources[looked:]; !slices.Equal(left, want) || int(statuses[0].ManagedCount) != len(want) {
			t.Errorf("inventory written %v (count %d), want the %d objects not looked at: %v", left, statuses[0].ManagedCount, len(want), want)
		}
	})
}

// A tenant's own API server can send objects carrying the marks of any
// resource, whose UID is no secret: its objects carry it. Once a resource's
// objects are watched on a cluster, only that cluster's events wake it; a
// resource not reconciled since the operator started is woken by any.
func TestOnlyTheWatchedClusterWakesAResource(t *testing.T) {
	vr := newVR(operatorNS, "app", configMapManifest)
	f := newFixture(t, []*v1alpha1.VidraResource{vr})
	event := func(cluster string) watchregistry.Event {
		return watchregistry.Event{Type: watchregistry.EventUpdated, Ref: watchregistry.Ref{Cluster: cluster, GVR: configMapsRef.GVR}, Object: liveApp(operatorNS, vr)}
	}
	forged := "https://tenant.example:6443 (Secret tenant/remote, key kubeconfig)"
	c := f.newController()
	if got := c.ownerOf(event(forged)); len(got) != 1 {
		t.Fatalf("before any reconcile, an event woke %v; want the resource", got)
	}
	f.c = c
	if _, err := c.sync(context.Background(), cache.MetaObjectToName(vr)); err != nil {
		t.Fatal(err)
	}
	if got := c.ownerOf(event(destination.LocalCluster)); len(got) != 1 {
		t.Errorf("an event of the cluster watched woke %v; want the resource", got)
	}
	if got := c.ownerOf(event(forged)); len(got) != 0 {
		t.Errorf("an event of another cluster, with the resource's marks, woke %v; want nothing", got)
	}
	// On the cluster watched, a tenant may copy the marks of a resource
	// that placed an object in its namespace onto objects of its own.
	for _, at := range []cache.ObjectName{{Namespace: "team-b", Name: "app"}, {Namespace: operatorNS, Name: "copy"}} {
		copied := event(destination.LocalCluster)
		copied.Object.SetNamespace(at.Namespace)
		copied.Object.SetName(at.Name)
		if got := c.ownerOf(copied); len(got) != 0 {
			t.Errorf("an event of %s, not in the manifest, with the resource's marks, woke %v; want nothing", at, got)
		}
	}
}

// A cleanup that runs out of time keeps, as the inventory, what it has not
// looked at yet of the inventory only: the manifest's objects that were
// never recorded are looked for again, as unrecorded, by the next try.
func TestDeletionOutOfTimeDoesNotRecordTheManifestsObjects(t *testing.T) {
	manifest := configMapManifest + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: never-applied\n"
	vr := newVR(operatorNS, "cut", manifest, deleting, func(vr *v1alpha1.VidraResource) {
		vr.Status.ManagedResources, vr.Status.ManagedCount = appInventory(operatorNS), 1
	})
	f := newFixture(t, []*v1alpha1.VidraResource{vr})
	// Out of time before the first object.
	f.reconcileTimeout = time.Nanosecond
	if _, err := f.run(cache.MetaObjectToName(vr)); err == nil {
		t.Fatal("sync returned no error, want one to retry with backoff")
	}
	f.mu.Lock()
	statuses := f.statuses
	f.mu.Unlock()
	if len(statuses) != 1 {
		t.Fatalf("%d status writes, want 1", len(statuses))
	}
	if got, want := statuses[0].ManagedResources, appInventory(operatorNS); !slices.Equal(got, want) {
		t.Errorf("inventory written %v, want the recorded object alone: %v", got, want)
	}
}

// Names the API server of a tenant's own cluster accepts, which JSON writes
// in 6 bytes a character, must not take the inventory past what a status
// can hold: the manifest is refused, and nothing is applied.
func TestAManifestWhoseNamesCannotFitItsInventoryIsRefused(t *testing.T) {
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"%d-%s\"\n", i, strings.Repeat("<", 240))
	}
	vr := newVR(operatorNS, "escaped", b.String())
	f := newFixture(t, []*v1alpha1.VidraResource{vr})
	if _, err := f.run(cache.MetaObjectToName(vr)); err != nil {
		t.Fatalf("sync: %v, want a stalled resource and no retry", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.actions {
		if strings.HasPrefix(a, "apply ") || strings.HasPrefix(a, "get configmaps") {
			t.Fatalf("request %q, want none for the manifest's objects", a)
		}
	}
	if len(f.statuses) != 1 {
		t.Fatalf("%d status writes, want 1", len(f.statuses))
	}
	ready := meta.FindStatusCondition(f.statuses[0].Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Reason != v1alpha1.ReasonManifestTooLarge || !strings.Contains(ready.Message, "split the objects") {
		t.Errorf("Ready condition %+v, want ManifestTooLarge saying what to do", ready)
	}
}

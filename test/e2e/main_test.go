// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package e2e_test runs Vidra's controller end to end: one operator, started
// in-process through internal/operator, against a real API server (and, for
// remote destinations, a second one). It covers what a user sees of a
// VidraResource: apply, update, prune and deletion policies, drift repair on
// events and on the interval, suspend, conflicts with other owners and
// writers, bad manifests and the operator's configuration, tenants'
// ServiceAccounts and remote destinations, including their outages. The
// operator trusts every namespace here, as a single-tenant cluster does;
// test/security runs the secure default and test/reliability the binary.
package e2e_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/operator"
	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

const operatorNamespace = "vidra-system"

var (
	env        *testenv.Env
	kube       kubernetes.Interface
	vidra      versioned.Interface
	dyn        dynamic.Interface
	reconciles = &reconcileCounter{counts: map[cache.ObjectName]map[controller.Trigger]int{}}
	vidraOp    *operator.Operator
	// metrics holds the operator's metrics, read with metricSum.
	metrics = prometheus.NewRegistry()
)

func TestMain(m *testing.M) { testenv.RunMain(m, &env, testenv.Options{}, startOperator) }

// startOperator installs the CRD and runs one operator, in-process, for the
// suite's tests, which isolate themselves by namespace.
func startOperator(ctx context.Context, e *testenv.Env) (func(), error) {
	kube = kubernetes.NewForConfigOrDie(e.Config)
	vidra = versioned.NewForConfigOrDie(e.Config)
	dyn = dynamic.NewForConfigOrDie(e.Config)
	// The tests of this suite put resources in namespaces of their own
	// and have them act as the operator: they opt into trusting every
	// namespace, as a single-tenant cluster does. test/security runs the
	// secure default.
	op, stop, err := testenv.RunOperator(ctx, e, operator.Options{
		Namespace:         operatorNamespace,
		TrustedNamespaces: []string{destination.AllNamespaces},
		Workers:           4,
		Linger:            2 * time.Second,
		OnReconcile:       reconciles.record,
		Metrics:           metrics,
	})
	vidraOp = op
	return stop, err
}

type reconcileCounter struct {
	mu     sync.Mutex
	counts map[cache.ObjectName]map[controller.Trigger]int
}

func (r *reconcileCounter) record(key cache.ObjectName, t controller.Trigger, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts[key] == nil {
		r.counts[key] = map[controller.Trigger]int{}
	}
	r.counts[key][t]++
}

// of returns how many reconciles of key each trigger caused, and the total.
func (r *reconcileCounter) of(ns, name string) (map[controller.Trigger]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[controller.Trigger]int{}
	total := 0
	for t, n := range r.counts[cache.ObjectName{Namespace: ns, Name: name}] {
		out[t] = n
		total += n
	}
	return out, total
}

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T) string {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Remove the resources first, so their finalizers run while the
		// operator still runs and the namespace can terminate.
		_ = vidra.InfrahubV1alpha1().VidraResources(ns.Name).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

func createVR(t *testing.T, ns, name, manifest string, mutate ...func(*v1alpha1.VidraResource)) *v1alpha1.VidraResource {
	t.Helper()
	return testenv.CreateVR(t, vidra, ns, name, manifest, mutate...)
}

// updateVR applies mutate to the current resource, retrying on conflicts.
func updateVR(t *testing.T, ns, name string, mutate func(*v1alpha1.VidraResource)) {
	t.Helper()
	testenv.UpdateVR(t, vidra, ns, name, mutate)
}

// waitVR polls the resource until cond holds, failing with what it last saw.
func waitVR(t *testing.T, ns, name, what string, cond func(*v1alpha1.VidraResource) bool) *v1alpha1.VidraResource {
	t.Helper()
	return testenv.WaitVR(t, vidra, ns, name, what, cond)
}

func isReady(vr *v1alpha1.VidraResource) bool {
	c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && vr.Status.ObservedGeneration == vr.Generation && c.ObservedGeneration == vr.Generation
}

func waitReady(t *testing.T, ns, name string) *v1alpha1.VidraResource {
	t.Helper()
	return waitVR(t, ns, name, "became Ready", isReady)
}

// hasCondition matches a condition of the current generation by status and reason.
func hasCondition(typ string, status metav1.ConditionStatus, reason string) func(*v1alpha1.VidraResource) bool {
	return testenv.HasCondition(typ, status, reason)
}

var (
	configMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	services    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	namespaces  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// waitObject polls one object until it exists and cond holds. cond never
// sees a missing object: absence is waited for with waitGone.
func waitObject(t *testing.T, gvr schema.GroupVersionResource, ns, name, what string, cond func(obj *unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	return waitObjectIn(t, dyn, "", gvr, ns, name, what, cond)
}

// waitObjectIn is waitObject on the cluster client reaches; where names
// that cluster in the failure message.
func waitObjectIn(t *testing.T, client dynamic.Interface, where string, gvr schema.GroupVersionResource, ns, name, what string, cond func(obj *unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	return pollObject(t, client, where, gvr, ns, name, what, func(obj *unstructured.Unstructured) bool { return obj != nil && cond(obj) })
}

// waitGone polls one object until it does not exist.
func waitGone(t *testing.T, gvr schema.GroupVersionResource, ns, name, what string) {
	t.Helper()
	waitGoneIn(t, dyn, "", gvr, ns, name, what)
}

// waitGoneIn is waitGone on the cluster client reaches.
func waitGoneIn(t *testing.T, client dynamic.Interface, where string, gvr schema.GroupVersionResource, ns, name, what string) {
	t.Helper()
	pollObject(t, client, where, gvr, ns, name, what, func(obj *unstructured.Unstructured) bool { return obj == nil })
}

// pollObject polls one object until done holds; obj is nil when it does not
// exist. Only waitObjectIn and waitGoneIn call it, so that no test's
// condition is handed a nil object.
func pollObject(t *testing.T, client dynamic.Interface, where string, gvr schema.GroupVersionResource, ns, name, what string, done func(obj *unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	return pollObjectWithin(t, time.Minute, client, where, gvr, ns, name, what, done)
}

// pollObjectWithin is pollObject with a deadline of its own, for the waits
// whose work grows with a bundle (waitBundleGone).
func pollObjectWithin(t *testing.T, deadline time.Duration, client dynamic.Interface, where string, gvr schema.GroupVersionResource, ns, name, what string, done func(obj *unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, deadline, true, func(ctx context.Context) (bool, error) {
		obj, err := client.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			obj, err = nil, nil
		}
		if err != nil {
			return false, nil
		}
		last = obj
		return done(obj), nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s%s never %s: %v\nlast seen: %v", gvr.Resource, ns, name, where, what, err, last)
	}
	return last
}

// exists is the condition of waitObject that any existing object meets.
func exists(*unstructured.Unstructured) bool { return true }

// requestReconcile sets the resource's requested-at annotation to a fresh
// value, which wakes it, and returns the value.
func requestReconcile(t *testing.T, ns, name string) string {
	t.Helper()
	value := time.Now().Format(time.RFC3339Nano)
	updateVR(t, ns, name, func(vr *v1alpha1.VidraResource) {
		if vr.Annotations == nil {
			vr.Annotations = map[string]string{}
		}
		vr.Annotations[v1alpha1.RequestedAtAnnotation] = value
	})
	return value
}

// reconciled is the barrier of the checks that something does not happen:
// it requests a reconcile of the resource and waits until that reconcile
// has finished, so that what the test did before the call has been acted
// on. The reconcile counter shows it (OnReconcile runs once sync has
// returned, also for a suspended resource or one being deleted), and a
// resource that is neither echoes the request in
// status.lastHandledReconcileAt. It returns the resource's reconciles by
// trigger, which then include every reconcile begun before the request was
// seen.
func reconciled(t *testing.T, ns, name string) map[controller.Trigger]int {
	t.Helper()
	before, _ := reconciles.of(ns, name)
	value := requestReconcile(t, ns, name)
	waitCount(t, ns, name, "the requested reconcile", func(by map[controller.Trigger]int) bool {
		return by[controller.TriggerRequested] > before[controller.TriggerRequested]
	})
	// A status write that met a conflict is retried: the echo may come with
	// the retry.
	waitVR(t, ns, name, "echoed the request "+value, func(vr *v1alpha1.VidraResource) bool {
		return vr.Spec.Suspend || vr.DeletionTimestamp != nil || vr.Status.LastHandledReconcileAt == value
	})
	by, _ := reconciles.of(ns, name)
	return by
}

// waitCount polls the reconcile counts of a resource until cond holds.
func waitCount(t *testing.T, ns, name, what string, cond func(map[controller.Trigger]int) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		by, _ := reconciles.of(ns, name)
		return cond(by), nil
	})
	if err != nil {
		by, _ := reconciles.of(ns, name)
		t.Fatalf("reconciles of %s/%s never showed %s: %v", ns, name, what, by)
	}
}

// barrier is a VidraResource of its own, in a test's namespace, with one
// object of each kind the test watches. The watch events of one informer
// (one per kind and namespace) are handled in order, one at a time: once
// pass has deleted the barrier's objects and seen Vidra restore them, every
// event of those kinds in the namespace before the deletions has been
// handled, and whatever reconcile it queued was queued before the
// barrier's, in the namespace's FIFO.
type barrier struct {
	ns   string
	gvrs []schema.GroupVersionResource
}

// barrierName names the barrier resource and each of its objects.
const barrierName = "barrier"

// newBarrier creates the barrier resource of ns, with an object of each of
// gvrs (configMaps, services or deployments), and waits until it is Ready.
func newBarrier(t *testing.T, ns string, gvrs ...schema.GroupVersionResource) *barrier {
	t.Helper()
	var parts []string
	for _, gvr := range gvrs {
		switch gvr {
		case configMaps:
			parts = append(parts, configMap(barrierName, nil))
		case services:
			parts = append(parts, strings.ReplaceAll(serviceDoc, "web", barrierName))
		case deployments:
			parts = append(parts, strings.ReplaceAll(deploymentDoc, "web", barrierName))
		default:
			t.Fatalf("no barrier object for %s", gvr.Resource)
		}
	}
	createVR(t, ns, barrierName, docs(parts...))
	waitReady(t, ns, barrierName)
	return &barrier{ns: ns, gvrs: gvrs}
}

// pass deletes the barrier's objects and waits until each is back.
func (b *barrier) pass(t *testing.T) {
	t.Helper()
	uids := map[schema.GroupVersionResource]types.UID{}
	for _, gvr := range b.gvrs {
		obj := waitObject(t, gvr, b.ns, barrierName, "exists", exists)
		uids[gvr] = obj.GetUID()
		if err := dyn.Resource(gvr).Namespace(b.ns).Delete(t.Context(), barrierName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, gvr := range b.gvrs {
		waitObject(t, gvr, b.ns, barrierName, "was restored past the barrier", func(o *unstructured.Unstructured) bool {
			return o.GetUID() != uids[gvr]
		})
	}
}

var vrResource = v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.ResourcePlural)

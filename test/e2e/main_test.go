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
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

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
)

func TestMain(m *testing.M) { testenv.RunMain(m, &env, testenv.Options{}, startOperator) }

// startOperator installs the CRD and runs one operator, in-process, for the
// suite's tests, which isolate themselves by namespace.
func startOperator(ctx context.Context, e *testenv.Env) (func(), error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := testenv.InstallCRDs(ctx, e.Config, filepath.Join(root, "manifests/crd/infrahub.operators.com_vidraresources.yaml")); err != nil {
		return nil, err
	}
	kube = kubernetes.NewForConfigOrDie(e.Config)
	vidra = versioned.NewForConfigOrDie(e.Config)
	dyn = dynamic.NewForConfigOrDie(e.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	ctx, cancel := context.WithCancel(ctx)
	// The tests of this suite put resources in namespaces of their own
	// and have them act as the operator: they opt into trusting every
	// namespace, as a single-tenant cluster does. test/security runs the
	// secure default.
	op, err := operator.New(ctx, operator.Options{
		Config:            cfg,
		Namespace:         operatorNamespace,
		TrustedNamespaces: []string{controller.AllNamespaces},
		Workers:           4,
		Linger:            2 * time.Second,
		OnReconcile:       reconciles.record,
	})
	if err != nil {
		cancel()
		return nil, err
	}
	vidraOp = op
	done := make(chan error, 1)
	go func() { done <- op.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Println("operator:", err)
		}
	}, nil
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

// waitObject polls one object until cond holds; obj is nil when it does not exist.
func waitObject(t *testing.T, gvr schema.GroupVersionResource, ns, name, what string, cond func(obj *unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	return waitObjectIn(t, dyn, "", gvr, ns, name, what, cond)
}

// waitObjectIn polls one object of the cluster client reaches until cond
// holds; where names that cluster in the failure message.
func waitObjectIn(t *testing.T, client dynamic.Interface, where string, gvr schema.GroupVersionResource, ns, name, what string, cond func(obj *unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		obj, err := client.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			obj, err = nil, nil
		}
		if err != nil {
			return false, nil
		}
		last = obj
		return cond(obj), nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s%s never %s: %v\nlast seen: %v", gvr.Resource, ns, name, where, what, err, last)
	}
	return last
}

func exists(obj *unstructured.Unstructured) bool { return obj != nil }
func gone(obj *unstructured.Unstructured) bool   { return obj == nil }

// stays checks that cond keeps holding for d, polling; it is how a test shows
// that something does not happen (a reconcile, a repair) within a window.
func stays(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, d, true, func(context.Context) (bool, error) {
		if !cond() {
			return false, fmt.Errorf("%s stopped holding", what)
		}
		return false, nil
	})
	if err != nil && !wait.Interrupted(err) {
		t.Fatal(err)
	}
}

var vrResource = v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.ResourcePlural)

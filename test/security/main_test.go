// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package security_test attacks Vidra as a hostile tenant would, against a
// real API server, with the operator running in-process under the default
// install's settings: only its own namespace is trusted, no default
// ServiceAccount. Each test is one attack and the guarantee that stops it
// (docs/security.md lists them).
package security_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/operator"
	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

// operatorNamespace is the operator's own namespace: the only trusted one.
const operatorNamespace = "vidra-system"

var (
	env   *testenv.Env
	kube  kubernetes.Interface
	vidra versioned.Interface
	dyn   dynamic.Interface
	// vidraOp is the operator under attack, with the default options.
	vidraOp *operator.Operator
	// reconciles records every reconcile the operator finishes, in order.
	reconciles = &reconcileLog{}
)

// operatorWorkers is the harness operator's number of workers.
const operatorWorkers = 4

// reconcileLog is the order in which the operator finished reconciles: what
// a test of fairness counts, instead of timing anything.
type reconcileLog struct {
	mu   sync.Mutex
	keys []cache.ObjectName
}

func (l *reconcileLog) record(key cache.ObjectName, _ controller.Trigger, _ string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keys = append(l.keys, key)
}

// snapshot returns the reconciles finished so far.
func (l *reconcileLog) snapshot() []cache.ObjectName {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.keys)
}

// waitFor polls until the log holds key past its first from entries, and
// returns the entries past from. The hook that records a reconcile runs
// once the reconcile has written its status, so a test that saw the status
// may be ahead of the log.
func (l *reconcileLog) waitFor(t *testing.T, from int, key cache.ObjectName) []cache.ObjectName {
	t.Helper()
	var log []cache.ObjectName
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		log = l.snapshot()[from:]
		return slices.Contains(log, key), nil
	})
	if err != nil {
		t.Fatalf("no reconcile of %s was recorded among the %d since: %v", key, len(log), err)
	}
	return log
}

func TestMain(m *testing.M) { testenv.RunMain(m, &env, testenv.Options{}, startOperator) }

func startOperator(ctx context.Context, e *testenv.Env) (func(), error) {
	kube = kubernetes.NewForConfigOrDie(e.Config)
	vidra = versioned.NewForConfigOrDie(e.Config)
	dyn = dynamic.NewForConfigOrDie(e.Config)
	// The defaults of the shipped install: nothing here widens trust.
	op, stop, err := testenv.RunOperator(ctx, e, operator.Options{Namespace: operatorNamespace, Workers: operatorWorkers, Linger: 2 * time.Second,
		OnReconcile: reconciles.record})
	vidraOp = op
	return stop, err
}

// tenantNamespace creates a namespace for one test (an untrusted tenant's)
// and deletes it, its VidraResources first, afterwards.
func tenantNamespace(t *testing.T) string {
	t.Helper()
	ns := testenv.Namespace(t, kube, "tenant-")
	t.Cleanup(func() {
		_ = vidra.InfrahubV1alpha1().VidraResources(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	return ns
}

// drainOnCleanup deletes, when the test ends, the VidraResources of ns and
// then ns itself, and waits until both are gone: the resources first, so
// that their finalizers delete their objects while the ServiceAccounts they
// act as still have their rights. It runs before the cleanups of
// tenantNamespace, which then find nothing left to delete.
func drainOnCleanup(t *testing.T, ns string, timeout time.Duration) {
	t.Helper()
	t.Cleanup(func() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		vrs := vidra.InfrahubV1alpha1().VidraResources(ns)
		_ = vrs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		left := -1
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			list, err := vrs.List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			left = len(list.Items)
			return left == 0, nil
		})
		if err != nil {
			t.Errorf("cleanup: %d VidraResources of %s left after %s: %v", left, ns, timeout, err)
			return
		}
		if err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: delete namespace %s: %v", ns, err)
			return
		}
		err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("cleanup: namespace %s still there after %s: %v", ns, timeout, err)
			return
		}
		t.Logf("cleanup: namespace %s and its resources gone in %s", ns, time.Since(start).Round(time.Millisecond))
	})
}

// serviceAccount creates ServiceAccount name in ns, bound to ClusterRole
// "edit" in each of the namespaces given: the usual tenant deployer.
func serviceAccount(t *testing.T, ns, name string, editIn ...string) {
	t.Helper()
	ctx := t.Context()
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if len(editIn) > 0 {
		// kube-controller-manager fills the aggregated ClusterRole "edit" a
		// moment after it starts.
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			cr, err := kube.RbacV1().ClusterRoles().Get(ctx, "edit", metav1.GetOptions{})
			return err == nil && len(cr.Rules) > 0, nil
		})
		if err != nil {
			t.Fatalf("ClusterRole edit never got its rules: %v", err)
		}
	}
	for _, target := range editIn {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "vidra-" + ns + "-" + name, Namespace: target},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
		}
		if _, err := kube.RbacV1().RoleBindings(target).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

func createVR(t *testing.T, ns, name, manifest string, mutate ...func(*v1alpha1.VidraResource)) *v1alpha1.VidraResource {
	t.Helper()
	return testenv.CreateVR(t, vidra, ns, name, manifest, mutate...)
}

func asServiceAccount(name string) func(*v1alpha1.VidraResource) {
	return func(vr *v1alpha1.VidraResource) { vr.Spec.ServiceAccountName = name }
}

// waitVR polls the resource until cond holds, failing with what it last saw.
func waitVR(t *testing.T, ns, name, what string, cond func(*v1alpha1.VidraResource) bool) *v1alpha1.VidraResource {
	t.Helper()
	return testenv.WaitVR(t, vidra, ns, name, what, cond)
}

// hasCondition matches a condition of the current generation by status and reason.
func hasCondition(typ string, status metav1.ConditionStatus, reason string) func(*v1alpha1.VidraResource) bool {
	return testenv.HasCondition(typ, status, reason)
}

func isReady(vr *v1alpha1.VidraResource) bool {
	return hasCondition(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled)(vr)
}

var (
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// getObject returns the object, or nil when it does not exist.
func getObject(t *testing.T, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := dyn.Resource(gvr).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// waitObject polls one object until cond holds; obj is nil when it does not
// exist, and cond must allow for that.
func waitObject(t *testing.T, gvr schema.GroupVersionResource, ns, name, what string, cond func(obj *unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		obj, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
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
		t.Fatalf("%s %s/%s never %s: %v\nlast seen: %v", gvr.Resource, ns, name, what, err, last)
	}
	return last
}

// memAfterGC returns the operator's process memory after a collection: the
// attacks measure what the caches keep, not the garbage of the moment.
func memAfterGC() runtime.MemStats {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m
}

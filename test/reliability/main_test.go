// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package reliability_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

var (
	env   *testenv.Env
	kube  kubernetes.Interface
	vidra versioned.Interface
	// vidraBinary is cmd/vidra, built once by TestMain.
	vidraBinary string
	// kubeconfig is an admin kubeconfig file for the operator processes.
	kubeconfig string
)

func TestMain(m *testing.M) {
	testenv.RunMain(m, &env, testenv.Options{
		// The SIGKILL test's 200 Services need more than the harness's /24.
		ExtraAPIServerArgs: []string{"--service-cluster-ip-range=10.0.0.0/16"},
	}, setup)
}

func setup(ctx context.Context, e *testenv.Env) (func(), error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "vidra-reliability-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	// With the race detector, like the tests: a race in the operator under
	// kills and restarts is what this package is most likely to find.
	vidraBinary = filepath.Join(dir, "vidra")
	if err := testenv.BuildVidra(ctx, vidraBinary, true); err != nil {
		cleanup()
		return nil, err
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := e.WriteKubeconfig(kubeconfig); err != nil {
		cleanup()
		return nil, err
	}
	kube = kubernetes.NewForConfigOrDie(e.Config)
	vidra = versioned.NewForConfigOrDie(e.Config)
	if err := testenv.InstallCRDs(ctx, e.Config, filepath.Join(root, "manifests/crd/infrahub.operators.com_vidraresources.yaml")); err != nil {
		cleanup()
		return nil, err
	}
	return cleanup, nil
}

// namespace creates a namespace for one test. It is both the operator's own
// namespace (lease, configuration) and the only one it watches, so that
// tests never see each other's resources. On cleanup the finalizers of
// resources left behind by a failed test are removed, so that the namespace
// can go.
func namespace(t *testing.T) string {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rel-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if list, err := vidra.InfrahubV1alpha1().VidraResources(ns.Name).List(ctx, metav1.ListOptions{}); err == nil {
			for _, vr := range list.Items {
				if len(vr.Finalizers) > 0 {
					_, _ = vidra.InfrahubV1alpha1().VidraResources(ns.Name).Patch(ctx, vr.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				}
			}
		}
		_ = kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// operator is one vidra process of a test.
type operator struct {
	*testenv.VidraProcess
	started time.Time
}

// startOperator starts vidra for namespace ns and waits until it is ready.
// The process is killed when the test ends, and its log is checked for data
// races then; a failing test quotes the log's tail.
func startOperator(t *testing.T, ns string, args ...string) *operator {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "vidra.log")
	p, err := testenv.StartVidra(testenv.VidraOptions{
		Binary:     vidraBinary,
		Kubeconfig: kubeconfig,
		Namespace:  ns,
		LogPath:    logPath,
		Args:       append([]string{"--watch-namespace=" + ns, "--log-format=json", "--workers=8"}, args...),
	})
	if err != nil {
		t.Fatal(err)
	}
	op := &operator{VidraProcess: p, started: time.Now()}
	t.Cleanup(func() {
		op.Kill()
		data, _ := os.ReadFile(logPath)
		if strings.Contains(string(data), "WARNING: DATA RACE") {
			t.Errorf("the operator (pid %d) reported a data race:\n%s", op.PID(), raceReport(string(data)))
		}
		if t.Failed() {
			t.Logf("log of vidra pid %d (tail):\n%s", op.PID(), tail(string(data), 40))
		}
	})
	if err := p.WaitReady(t.Context(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return op
}

func raceReport(log string) string {
	i := strings.Index(log, "WARNING: DATA RACE")
	end := min(len(log), i+6000)
	return log[i:end]
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// metric scrapes one sum from the operator's /metrics; 0 if unreachable.
func (op *operator) metric(ctx context.Context, name string, match map[string]string) float64 {
	m, err := op.Metrics(ctx)
	if err != nil {
		return 0
	}
	return m.Sum(name, match)
}

// logTime returns the time of the first JSON log line of the operator whose
// message starts with msg.
func (op *operator) logTime(msg string) (time.Time, bool) {
	f, err := os.Open(op.LogPath)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var line struct {
			TS  float64 `json:"ts"`
			Msg string  `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || !strings.HasPrefix(line.Msg, msg) {
			continue
		}
		sec, frac := math.Modf(line.TS)
		return time.Unix(int64(sec), int64(frac*1e9)), true
	}
	return time.Time{}, false
}

// appManifest is resource i's four objects, named after it so that many
// resources share one namespace: a ConfigMap, a ServiceAccount, a Service and
// a Deployment scaled to zero.
func appManifest(i int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: app-%03[1]d
data:
  greeting: hello-%[1]d
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: app-%03[1]d
---
apiVersion: v1
kind: Service
metadata:
  name: app-%03[1]d
spec:
  selector:
    app: app-%03[1]d
  ports:
  - port: 80
    targetPort: 8080
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%03[1]d
spec:
  replicas: 0
  selector:
    matchLabels:
      app: app-%03[1]d
  template:
    metadata:
      labels:
        app: app-%03[1]d
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
`, i)
}

func resourceName(i int) string { return fmt.Sprintf("app-%03d", i) }

// createResources creates n resources in ns, eight at a time.
func createResources(t *testing.T, ns string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				vr := &v1alpha1.VidraResource{
					ObjectMeta: metav1.ObjectMeta{Name: resourceName(i), Namespace: ns},
					Spec: v1alpha1.VidraResourceSpec{
						Manifest:    appManifest(i),
						Destination: v1alpha1.Destination{ReconcileOnEvents: ptr.To(true)},
					},
				}
				if _, err := vidra.InfrahubV1alpha1().VidraResources(ns).Create(context.Background(), vr, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// converged counts the resources of ns that are Ready for their current
// generation with four objects in their inventory.
func converged(ctx context.Context, ns string) (int, error) {
	list, err := vidra.InfrahubV1alpha1().VidraResources(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	ready := 0
	for _, vr := range list.Items {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		if c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == vr.Generation && len(vr.Status.ManagedResources) == 4 && vr.DeletionTimestamp == nil {
			ready++
		}
	}
	return ready, nil
}

// waitConverged polls until n resources of ns have converged.
func waitConverged(t *testing.T, ns string, n int, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	last := 0
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ready, err := converged(ctx, ns)
		if err != nil {
			return false, nil
		}
		last = ready
		return ready == n, nil
	})
	if err != nil {
		t.Fatalf("%d of %d resources converged after %s: %v; for example: %s", last, n, timeout, err, notConverged(ns))
	}
	return time.Since(start)
}

// notConverged describes the status of one resource that has not converged,
// for a failure message.
func notConverged(ns string) string {
	list, err := vidra.InfrahubV1alpha1().VidraResources(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, vr := range list.Items {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != vr.Generation || len(vr.Status.ManagedResources) != 4 {
			return fmt.Sprintf("%s generation %d, inventory of %d, conditions %+v", vr.Name, vr.Generation, len(vr.Status.ManagedResources), vr.Status.Conditions)
		}
	}
	return "none"
}

// managedObject is one object carrying an owner-uid label.
type managedObject struct {
	kind, namespace, name, ownerUID string
}

// listManaged lists the ConfigMaps, ServiceAccounts, Services and
// Deployments of ns that carry Vidra's owner-uid label.
func listManaged(ctx context.Context, ns string) ([]managedObject, error) {
	opts := metav1.ListOptions{LabelSelector: v1alpha1.OwnerUIDLabel}
	var out []managedObject
	add := func(kind string, m metav1.Object) {
		out = append(out, managedObject{kind: kind, namespace: m.GetNamespace(), name: m.GetName(), ownerUID: m.GetLabels()[v1alpha1.OwnerUIDLabel]})
	}
	cms, err := kube.CoreV1().ConfigMaps(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range cms.Items {
		add("ConfigMap", &cms.Items[i])
	}
	sas, err := kube.CoreV1().ServiceAccounts(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range sas.Items {
		add("ServiceAccount", &sas.Items[i])
	}
	svcs, err := kube.CoreV1().Services(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range svcs.Items {
		add("Service", &svcs.Items[i])
	}
	deps, err := kube.AppsV1().Deployments(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range deps.Items {
		add("Deployment", &deps.Items[i])
	}
	return out, nil
}

// waitRestored polls until check passes, returning how long that took.
func waitRestored(t *testing.T, what string, timeout time.Duration, check func(ctx context.Context) bool) time.Duration {
	t.Helper()
	start := time.Now()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return check(ctx), nil
	})
	if err != nil {
		t.Fatalf("%s: not repaired within %s: %v", what, timeout, err)
	}
	return time.Since(start)
}

func configMapExists(ns, name string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}
}

func deploymentScaledToZero(ns, name string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 0
	}
}

func deleteConfigMap(t *testing.T, ns, name string) {
	t.Helper()
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// scaleDeployment sets replicas through the scale subresource with
// kubectl scale's field manager, as a person would.
func scaleDeployment(t *testing.T, ns, name string, replicas int) {
	t.Helper()
	body := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	err := kube.AppsV1().RESTClient().Patch(types.MergePatchType).Namespace(ns).Resource("deployments").Name(name).
		SubResource("scale").Param("fieldManager", "kubectl-scale").Body(body).Do(t.Context()).Error()
	if err != nil {
		t.Fatalf("scale Deployment %s/%s: %v", ns, name, err)
	}
}

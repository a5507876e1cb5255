// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/operator"
	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

var (
	env   *testenv.Env
	kube  kubernetes.Interface
	vidra versioned.Interface
)

func TestMain(m *testing.M) {
	testenv.RunMain(m, &env, testenv.Options{}, func(ctx context.Context, e *testenv.Env) (func(), error) {
		root, err := testenv.RepoRoot()
		if err != nil {
			return nil, err
		}
		kube = kubernetes.NewForConfigOrDie(e.Config)
		vidra = versioned.NewForConfigOrDie(e.Config)
		return nil, testenv.InstallCRDs(ctx, e.Config, filepath.Join(root, "manifests/crd/infrahub.operators.com_vidraresources.yaml"))
	})
}

func namespace(t *testing.T) string {
	t.Helper()
	return testenv.Namespace(t, kube, "op-")
}

// instance is one operator run in-process, scoped to one namespace so that
// tests do not reconcile each other's resources.
type instance struct {
	op          *operator.Operator
	metrics     *prometheus.Registry
	metricsAddr string
	probeAddr   string
	cancel      context.CancelFunc
	done        chan error
	mu          sync.Mutex
	reconciles  []reconcile
	stopOnce    sync.Once
	stopErr     error
}

type reconcile struct {
	key     cache.ObjectName
	trigger controller.Trigger
	at      time.Time
}

func (i *instance) count(trigger controller.Trigger) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	n := 0
	for _, r := range i.reconciles {
		if trigger == "" || r.trigger == trigger {
			n++
		}
	}
	return n
}

// countOf is the number of reconciles of ns/name so far.
func (i *instance) countOf(ns, name string) int { return len(i.triggersOf(ns, name)) }

// triggersOf lists what woke each reconcile of ns/name, in order.
func (i *instance) triggersOf(ns, name string) []controller.Trigger {
	i.mu.Lock()
	defer i.mu.Unlock()
	var out []controller.Trigger
	for _, r := range i.reconciles {
		if r.key == (cache.ObjectName{Namespace: ns, Name: name}) {
			out = append(out, r.trigger)
		}
	}
	return out
}

func (i *instance) first() (time.Time, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if len(i.reconciles) == 0 {
		return time.Time{}, false
	}
	return i.reconciles[0].at, true
}

// stop ends the operator and waits for it; it may be called again.
func (i *instance) stop() error {
	i.stopOnce.Do(func() {
		i.cancel()
		i.stopErr = <-i.done
	})
	return i.stopErr
}

func start(t *testing.T, ns string, mutate func(*operator.Options)) *instance {
	t.Helper()
	i := &instance{metrics: prometheus.NewRegistry(), done: make(chan error, 1)}
	cfg := rest.CopyConfig(env.Config)
	// Port 0: the kernel picks a free port as the server binds it. A port
	// found free first and bound later can be taken in between by the
	// tests of other packages, which run at the same time.
	opts := operator.Options{
		Config: cfg, Namespace: ns, WatchNamespace: ns, Workers: 2, Linger: time.Second,
		Metrics: i.metrics, MetricsAddr: "127.0.0.1:0", ProbeAddr: "127.0.0.1:0",
		OnReconcile: func(key cache.ObjectName, trigger controller.Trigger, _ string) {
			i.mu.Lock()
			defer i.mu.Unlock()
			i.reconciles = append(i.reconciles, reconcile{key, trigger, time.Now()})
		},
	}
	if mutate != nil {
		mutate(&opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	op, err := operator.New(ctx, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	i.op, i.cancel = op, cancel
	go func() { i.done <- op.Run(ctx) }()
	t.Cleanup(func() { _ = i.stop() })
	err = wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-i.done:
			i.done <- err // for stop
			return false, fmt.Errorf("the operator stopped as it started: %w", err)
		default:
		}
		i.metricsAddr, i.probeAddr = op.ServedAddrs()
		return i.metricsAddr != "" && i.probeAddr != "", nil
	})
	if err != nil {
		t.Fatalf("metrics and probe servers: %v", err)
	}
	return i
}

const cmDoc = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  k: v\n"

func createVR(t *testing.T, ns, name, manifest string, mutate ...func(*v1alpha1.VidraResource)) {
	t.Helper()
	testenv.CreateVR(t, vidra, ns, name, manifest, mutate...)
}

func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func ready(ns, name string) func() bool {
	return func() bool {
		vr, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && vr.Status.ObservedGeneration == vr.Generation
	}
}

func configMapExists(ns, name string) func() bool {
	return func() bool {
		_, err := kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestInstallManifestsPassServerSideDryRun(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// A server-side dry run creates nothing, so the namespace the other
	// objects go to must exist for real.
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vidra-system"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	// The default install, and the overlay of sharded replicas.
	for _, dir := range []string{"manifests", "deploy/sharded"} {
		out, err := exec.CommandContext(t.Context(), env.Kubectl(), "--kubeconfig", kubeconfig, "--cache-dir", t.TempDir(),
			"apply", "-k", filepath.Join(root, dir), "--dry-run=server").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl apply -k %s --dry-run=server: %v\n%s", dir, err, out)
		}
		for _, want := range []string{"customresourcedefinition", "clusterrole.rbac.authorization.k8s.io/vidra-manager", "deployment.apps/vidra", "configmap/vidra-config", "service/vidra-metrics"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("dry run of %s lacks %s:\n%s", dir, want, out)
			}
		}
	}
	out, err := exec.CommandContext(t.Context(), env.Kubectl(), "kustomize", filepath.Join(root, "deploy/sharded")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "- --sharding") || strings.Contains(string(out), "--leader-elect") || !strings.Contains(string(out), "replicas: 3") {
		t.Errorf("deploy/sharded does not run three sharded replicas without leader election (%v):\n%s", err, out)
	}
}

func TestProbesAnswer(t *testing.T) {
	ns := namespace(t)
	i := start(t, ns, nil)
	poll(t, 30*time.Second, "readyz never answered ok", func() bool {
		code, _ := getQuiet("http://" + i.probeAddr + "/readyz")
		return code == http.StatusOK
	})
	if code, body := get(t, "http://"+i.probeAddr+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz = %d %s", code, body)
	}
}

func getQuiet(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metricValue sums the samples of a family whose labels contain every pair of want.
func metricValue(t *testing.T, reg *prometheus.Registry, family string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Histogram != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

func TestMetricsShowReconcilesAndWhatWokeThem(t *testing.T) {
	ns := namespace(t)
	operator.RegisterClientMetrics(prometheus.NewRegistry(), "") // the process-wide hook, once
	i := start(t, ns, nil)
	// Two resources, so that each cause is the only one that can wake its
	// resource: "tick" re-checks every second, "m" never on an interval, so
	// the repair of m's ConfigMap can only be an event's work. (With both on
	// one resource, an interval reconcile could repair the drift first.)
	createVR(t, ns, "tick", fmt.Sprintf(cmDoc, "tick"), func(vr *v1alpha1.VidraResource) {
		vr.Spec.Interval = &metav1.Duration{Duration: time.Second}
	})
	createVR(t, ns, "m", fmt.Sprintf(cmDoc, "m"), func(vr *v1alpha1.VidraResource) {
		vr.Spec.Interval = &metav1.Duration{}
	})
	poll(t, 30*time.Second, "resource never Ready", ready(ns, "tick"))
	poll(t, 30*time.Second, "resource never Ready", ready(ns, "m"))

	poll(t, 30*time.Second, "no interval reconcile", func() bool {
		return metricValue(t, i.metrics, "vidra_reconciles_total", map[string]string{"trigger": "interval"}) >= 1
	})
	events := metricValue(t, i.metrics, "vidra_reconciles_total", map[string]string{"trigger": "event"})
	before := i.countOf(ns, "m")
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "m", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "drift not corrected", configMapExists(ns, "m"))
	// The repair's reconcile is recorded once sync returns, a moment after
	// the ConfigMap is back: wait for it, then look at what woke it.
	poll(t, 30*time.Second, "no reconcile of m after the delete", func() bool { return i.countOf(ns, "m") > before })
	if got := i.triggersOf(ns, "m")[before:]; got[0] != controller.TriggerEvent {
		t.Errorf("the repair of m was a %q reconcile, want event (reconciles since the delete: %v)", got[0], got)
	}
	poll(t, 30*time.Second, "drift repair not counted in vidra_reconciles_total{trigger=event}", func() bool {
		return metricValue(t, i.metrics, "vidra_reconciles_total", map[string]string{"trigger": "event"}) >= events+1
	})
	if v := metricValue(t, i.metrics, "vidra_drift_corrections_total", map[string]string{"kind": "ConfigMap"}); v != 1 {
		t.Errorf("vidra_drift_corrections_total{kind=ConfigMap} = %v, want 1", v)
	}
	// A merge patch: the operator writes the status meanwhile, which an
	// update of a resource read before would conflict with.
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"now"}}}`, v1alpha1.RequestedAtAnnotation)
	if _, err := vidra.InfrahubV1alpha1().VidraResources(ns).Patch(t.Context(), "m", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "no requested reconcile", func() bool {
		return metricValue(t, i.metrics, "vidra_reconciles_total", map[string]string{"trigger": "requested"}) == 1
	})

	_, body := get(t, "http://"+i.metricsAddr+"/metrics")
	for _, family := range []string{
		"vidra_reconciles_total", "vidra_reconcile_duration_seconds", "vidra_drift_corrections_total", "vidra_applies_total",
		"vidra_watchregistry_informers", "vidra_watchregistry_events_delivered_total", "vidra_watchregistry_events_filtered_total",
		"workqueue_depth", "workqueue_queue_duration_seconds", "workqueue_work_duration_seconds", "workqueue_retries_total", "workqueue_adds_total",
	} {
		if !strings.Contains(body, "\n"+family) && !strings.Contains(body, "# TYPE "+family+" ") {
			t.Errorf("/metrics lacks %s", family)
		}
	}
	if v := metricValue(t, i.metrics, "vidra_applies_total", map[string]string{"result": "success"}); v < 2 {
		t.Errorf("applies = %v, want the create and the repair", v)
	}
}

func TestLeaderElectionOnlyLeaderReconcilesAndStandbyTakesOver(t *testing.T) {
	ns := namespace(t)
	election := func(id string) func(*operator.Options) {
		return func(o *operator.Options) {
			o.LeaderElection = operator.LeaderElection{Enabled: true, Identity: id,
				LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
		}
	}
	a := start(t, ns, election("a"))
	poll(t, 30*time.Second, "a never led", a.op.Leading)
	// The Lease is written under a manager name of its own, never under the
	// name of Vidra's applies, which would make it look adoptable.
	lease, err := kube.CoordinationV1().Leases(ns).Get(t.Context(), "vidra-leader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range lease.ManagedFields {
		if mf.Manager != v1alpha1.LeaderElectionFieldManager {
			t.Errorf("Lease written by field manager %q (%s), want only %q", mf.Manager, mf.Operation, v1alpha1.LeaderElectionFieldManager)
		}
	}
	b := start(t, ns, election("b"))
	poll(t, 30*time.Second, "b never became ready", b.op.Ready)

	createVR(t, ns, "le", fmt.Sprintf(cmDoc, "le"))
	poll(t, 30*time.Second, "resource never Ready", ready(ns, "le"))
	if b.count("") != 0 || b.op.Leading() {
		t.Fatalf("the standby reconciled %d times (leading %v)", b.count(""), b.op.Leading())
	}

	stopped := time.Now()
	if err := a.stop(); err != nil {
		t.Fatalf("leader stop: %v", err)
	}
	// Drift made while nobody leads is corrected by the new leader.
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "le", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the standby never took over and repaired", func() bool {
		return configMapExists(ns, "le")() && b.count("") > 0
	})
	first, _ := b.first()
	t.Logf("takeover: %v from the leader's stop to the new leader's first reconcile", first.Sub(stopped).Round(time.Millisecond))
}

func TestEventsForTransitionsAndNoneForNoOps(t *testing.T) {
	ns := namespace(t)
	i := start(t, ns, nil)
	createVR(t, ns, "ev", fmt.Sprintf(cmDoc, "ev"), func(vr *v1alpha1.VidraResource) {
		vr.Spec.Interval = &metav1.Duration{Duration: time.Second}
	})
	poll(t, 30*time.Second, "resource never Ready", ready(ns, "ev"))
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "ev", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Claim the object only once its owner has put it back, so that the
	// second resource meets it owned rather than racing to create it.
	poll(t, 30*time.Second, "drift not repaired", configMapExists(ns, "ev"))
	createVR(t, ns, "ev2", fmt.Sprintf(cmDoc, "ev"))
	reasons := func() map[string]int {
		list, err := kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return nil
		}
		out := map[string]int{}
		for _, e := range list.Items {
			out[e.InvolvedObject.Name+"/"+e.Reason] += int(e.Count)
		}
		return out
	}
	poll(t, 30*time.Second, "DriftCorrected and Conflict Events", func() bool {
		r := reasons()
		return r["ev/DriftCorrected"] > 0 && r["ev2/Conflict"] > 0
	})
	// The first apply has no Event (Ready says it); DriftCorrected came
	// after it, so it would be listed by now.
	if n := reasons()["ev/Applied"]; n != 0 {
		t.Errorf("the first apply recorded %d Applied Events", n)
	}
	// No-op periodic reconciles record nothing.
	before := reasons()
	intervals := i.count(controller.TriggerInterval)
	poll(t, 30*time.Second, "two more interval reconciles", func() bool { return i.count(controller.TriggerInterval) >= intervals+2 })
	// Events reach the API server through an asynchronous broadcaster, one
	// at a time in the order they were recorded. A drift of another
	// resource, made after those reconciles, is the marker: once its Event
	// is listed, so is any Event they recorded.
	createVR(t, ns, "marker", fmt.Sprintf(cmDoc, "marker"))
	poll(t, 30*time.Second, "marker never Ready", ready(ns, "marker"))
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "marker", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the marker's DriftCorrected Event", func() bool { return reasons()["marker/DriftCorrected"] > 0 })
	after := reasons()
	for _, reason := range []string{"ev/Applied", "ev/DriftCorrected"} {
		if after[reason] != before[reason] {
			t.Errorf("no-op interval reconciles recorded Events: %s went from %d to %d (%v)", reason, before[reason], after[reason], after)
		}
	}
}

// TestDefaultServiceAccountIsImpersonated runs an operator with
// DefaultServiceAccount (the --default-service-account flag): a resource that
// names no ServiceAccount acts as that one, in its own namespace, so it may
// write what the ServiceAccount's Role allows and is refused the rest, with
// the ServiceAccount named in the condition; a resource that names another
// ServiceAccount acts as that one instead.
func TestDefaultServiceAccountIsImpersonated(t *testing.T) {
	ns := namespace(t)
	ctx := t.Context()
	// "tenant" may write ConfigMaps; "reader" gets nothing.
	if _, err := testenv.CreateConfigMapTenant(ctx, kube, ns, "tenant"); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start(t, ns, func(o *operator.Options) { o.DefaultServiceAccount = "tenant" })

	createVR(t, ns, "allowed", fmt.Sprintf(cmDoc, "allowed"))
	poll(t, 30*time.Second, "the tenant's ConfigMap applied", ready(ns, "allowed"))

	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: not-allowed\nstringData:\n  k: v\n"
	createVR(t, ns, "refused", secret)
	forbidden(t, ns, "refused", "system:serviceaccount:"+ns+":tenant")

	createVR(t, ns, "as-reader", fmt.Sprintf(cmDoc, "as-reader"), func(vr *v1alpha1.VidraResource) { vr.Spec.ServiceAccountName = "reader" })
	forbidden(t, ns, "as-reader", "system:serviceaccount:"+ns+":reader")
	if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "not-allowed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused Secret: %v, want NotFound", err)
	}
}

// forbidden waits until the resource is not Ready for reason Forbidden with
// user in its message.
func forbidden(t *testing.T, ns, name, user string) {
	t.Helper()
	var msg string
	poll(t, 30*time.Second, name+" refused as "+user, func() bool {
		vr, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil {
			return false
		}
		msg = c.Message
		return c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonForbidden && strings.Contains(c.Message, user)
	})
	t.Logf("%s: %s", name, msg)
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	vidrainformers "github.com/vidra-operator/vidra/pkg/generated/informers/externalversions"
)

// baselineResult is kubectl apply --server-side of the same objects.
type baselineResult struct {
	Objects int     `json:"objects"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"objectsPerSecond"`
	Command string  `json:"command"`
	// CPUSeconds is what each process used while kubectl ran.
	CPUSeconds map[string]float64 `json:"cpuSeconds"`
	// Requests are kubectl's, from the audit log.
	Requests requestCount `json:"kubectlRequests"`
}

// runBaseline applies 4·n objects, doc(i) for i in 0…n-1 spread over
// namespaces of them, with one kubectl invocation of one multi-document
// file; kubectl sends one server-side apply per object, one after another.
func runBaseline(ctx context.Context, c *cluster, n, namespaces int, doc func(i int) string) (*baselineResult, error) {
	var b strings.Builder
	for i := range n {
		b.WriteString(doc(i))
		b.WriteString("---\n")
	}
	file := filepath.Join(c.dir, "baseline.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(c.dir, "kubectl.kubeconfig")
	if err := c.env.WriteUserKubeconfig(kubeconfig, kubectlUser, "system:masters"); err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", kubeconfig, "apply", "--server-side", "--field-manager=baseline", "-f", file}
	audit := auditLog{c.auditLog}
	mark := audit.mark()
	cpu0 := c.cpu()
	start := time.Now()
	out, err := exec.CommandContext(ctx, c.env.Kubectl(), args...).CombinedOutput()
	elapsed := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("kubectl apply --server-side: %w\n%s", err, tailLines(string(out), 10))
	}
	applied := strings.Count(string(out), " serverside-applied")
	if applied != 4*n {
		return nil, fmt.Errorf("kubectl applied %d objects, want %d:\n%s", applied, 4*n, tailLines(string(out), 10))
	}
	cpu := c.cpu().since(cpu0)
	time.Sleep(time.Second)
	reqs, err := audit.requests(kubectlUser, mark, start, start.Add(elapsed))
	if err != nil {
		return nil, err
	}
	return &baselineResult{
		Requests:   reqs,
		Objects:    applied,
		Seconds:    round(elapsed.Seconds(), 2),
		PerSec:     round(float64(applied)/elapsed.Seconds(), 1),
		Command:    "kubectl apply --server-side --field-manager=baseline -f <one file, " + fmt.Sprint(4*n) + " objects in " + fmt.Sprint(namespaces) + " namespaces>",
		CPUSeconds: cpu,
	}, nil
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// convergeTracker follows the resources through an informer of the
// benchmark's own and notes the moment all n are Ready=True for their
// current generation with 4 objects in their inventory. Vidra writes Ready
// only after every apply of the reconcile succeeded, so by then every object
// exists; verifyObjects checks that afterwards. Watching the resources alone
// keeps the benchmark's own load on the API server small.
type convergeTracker struct {
	prefix string
	n      int

	mu     sync.Mutex
	ready  map[string]bool
	doneAt time.Time
	done   chan struct{}
}

func newConvergeTracker(prefix string, n int) *convergeTracker {
	return &convergeTracker{prefix: prefix, n: n, ready: map[string]bool{}, done: make(chan struct{})}
}

func (t *convergeTracker) handler() cache.ResourceEventHandler {
	update := func(obj any) {
		vr, ok := obj.(*v1alpha1.VidraResource)
		if !ok || !strings.HasPrefix(vr.Namespace, t.prefix+"-") {
			return
		}
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		ready := c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == vr.Generation && vr.Status.ManagedCount == 4
		t.mu.Lock()
		defer t.mu.Unlock()
		t.ready[vr.Namespace+"/"+vr.Name] = ready
		if !t.doneAt.IsZero() || !ready {
			return
		}
		for _, r := range t.ready {
			if !r {
				return
			}
		}
		if len(t.ready) == t.n {
			t.doneAt = time.Now()
			close(t.done)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: update, UpdateFunc: func(_, obj any) { update(obj) }}
}

func (t *convergeTracker) progress() (ready int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.ready {
		if r {
			ready++
		}
	}
	return ready
}

// startTracker starts the tracker's informer; it stops with ctx.
func startTracker(ctx context.Context, c *cluster, t *convergeTracker) error {
	vf := vidrainformers.NewSharedInformerFactory(c.vidra, 0)
	if _, err := vf.Infrahub().V1alpha1().VidraResources().Informer().AddEventHandler(t.handler()); err != nil {
		return err
	}
	vf.Start(ctx.Done())
	for kind, ok := range vf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("bench informer %v did not sync", kind)
		}
	}
	return nil
}

// verifyObjects checks that each of the four kinds has one managed object
// in each namespace of prefix.
func verifyObjects(ctx context.Context, c *cluster, prefix string, n int) error {
	opts := metav1.ListOptions{LabelSelector: managedSelector}
	got := map[string]int{}
	add := func(kind, ns string) {
		if strings.HasPrefix(ns, prefix+"-") {
			got[kind]++
		}
	}
	cms, err := c.kube.CoreV1().ConfigMaps("").List(ctx, opts)
	if err != nil {
		return err
	}
	for _, o := range cms.Items {
		add("ConfigMap", o.Namespace)
	}
	sas, err := c.kube.CoreV1().ServiceAccounts("").List(ctx, opts)
	if err != nil {
		return err
	}
	for _, o := range sas.Items {
		add("ServiceAccount", o.Namespace)
	}
	svcs, err := c.kube.CoreV1().Services("").List(ctx, opts)
	if err != nil {
		return err
	}
	for _, o := range svcs.Items {
		add("Service", o.Namespace)
	}
	deps, err := c.kube.AppsV1().Deployments("").List(ctx, opts)
	if err != nil {
		return err
	}
	for _, o := range deps.Items {
		add("Deployment", o.Namespace)
	}
	for _, kind := range []string{"ConfigMap", "ServiceAccount", "Service", "Deployment"} {
		if got[kind] != n {
			return fmt.Errorf("%d managed %ss in %s-* namespaces, want %d", got[kind], kind, prefix, n)
		}
	}
	return nil
}

// convergeResult is the operator's converge of n resources.
type convergeResult struct {
	Resources int     `json:"resources"`
	Objects   int     `json:"objects"`
	Seconds   float64 `json:"seconds"`
	PerSec    float64 `json:"objectsPerSecond"`
	// CreateSeconds is how long creating the VidraResources took; the
	// converge clock includes it, since the operator works meanwhile.
	CreateSeconds float64 `json:"createSeconds"`
	// VsBaseline is baseline seconds / operator seconds: above 1 means
	// Vidra converged faster than kubectl applied.
	VsBaseline float64            `json:"speedupVsKubectl,omitempty"`
	Requests   requestCount       `json:"operatorRequests"`
	Reconciles map[string]float64 `json:"reconcilesByResultAndTrigger"`
	Applies    float64            `json:"applies"`
	CPUSeconds map[string]float64 `json:"cpuSeconds"`
	// OperatorCPUPerResourceMs is the operator's CPU per resource
	// converged: flat across sizes when cost grows linearly.
	OperatorCPUPerResourceMs float64 `json:"operatorCpuPerResourceMs"`
	// GCShare is the part of the operator's CPU the garbage collector took
	// during the converge (the runtime's own estimate), what its memory
	// policy costs; -1 when the operator does not export it.
	GCShare float64 `json:"gcShare"`
}

// runConverge creates n resources in namespaces bench-0000 … with creators
// parallel clients, the operator running and idle, and waits until every
// object exists and every resource is Ready. The clock starts just before
// the first create.
func runConverge(ctx context.Context, c *cluster, t *convergeTracker, n, creators int, timeout time.Duration) (*convergeResult, error) {
	m0, err := c.op.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	audit := auditLog{c.auditLog}
	mark := audit.mark()
	cpu0 := c.cpu()
	start := time.Now()
	if err := createResources(ctx, c.vidra, "bench", n, creators, true, nil); err != nil {
		return nil, err
	}
	created := time.Since(start)
	logf("created %d VidraResources in %s", n, created.Round(time.Millisecond))
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	deadline := time.After(timeout)
wait:
	for {
		select {
		case <-t.done:
			break wait
		case <-tick.C:
			logf("  converging: %d/%d Ready", t.progress(), n)
		case <-deadline:
			return nil, fmt.Errorf("not converged after %s: %d/%d Ready", timeout, t.progress(), n)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	t.mu.Lock()
	elapsed := t.doneAt.Sub(start)
	t.mu.Unlock()
	cpu := c.cpu().since(cpu0)
	end := start.Add(elapsed)
	if err := verifyObjects(ctx, c, "bench", n); err != nil {
		return nil, err
	}
	m1, err := c.op.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	time.Sleep(time.Second) // the audit log trails the responses a little
	reqs, err := audit.requests(operatorUser, mark, start, end)
	if err != nil {
		return nil, err
	}
	rec := map[string]float64{}
	for _, s := range m1["vidra_reconciles_total"] {
		k := s.Labels["result"] + "/" + s.Labels["trigger"]
		rec[k] = s.Value - m0.Sum("vidra_reconciles_total", s.Labels)
	}
	gcShare := gcShareOf(m0, m1, cpu["vidra"])
	return &convergeResult{
		OperatorCPUPerResourceMs: round(cpu["vidra"]*1000/float64(n), 2),
		GCShare:                  gcShare,
		Resources:                n,
		Objects:                  4 * n,
		Seconds:                  round(elapsed.Seconds(), 2),
		PerSec:                   round(float64(4*n)/elapsed.Seconds(), 1),
		CreateSeconds:            round(created.Seconds(), 2),
		Requests:                 reqs,
		Reconciles:               rec,
		Applies:                  m1.Sum("vidra_applies_total", nil) - m0.Sum("vidra_applies_total", nil),
		CPUSeconds:               cpu,
	}, nil
}

// gcSeconds is the runtime's count of the CPU its collector used.
const gcSeconds = "go_cpu_classes_gc_total_cpu_seconds_total"

// gcShareOf is the part of cpuSeconds, the CPU the process used between two
// scrapes of its metrics (from /proc), that its garbage collector took, by
// the runtime's own count; -1 without it. (The runtime's total CPU class is
// GOMAXPROCS times the wall time, idle included: no share of use.)
func gcShareOf(m0, m1 testenv.Metrics, cpuSeconds float64) float64 {
	if len(m1[gcSeconds]) == 0 {
		return -1
	}
	return gcShare(m1.Sum(gcSeconds, nil)-m0.Sum(gcSeconds, nil), cpuSeconds)
}

// gcShare is gcCPU over cpuSeconds, -1 when no CPU was used.
func gcShare(gcCPU, cpuSeconds float64) float64 {
	if cpuSeconds <= 0 {
		return -1
	}
	return round(gcCPU/cpuSeconds, 3)
}

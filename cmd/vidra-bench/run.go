// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// periodicResources is how many periodic-only resources the periodic drift
// measurement cycles through.
const periodicResources = 4

// samplePause separates drift samples (see measureDrift).
const samplePause = 50 * time.Millisecond

func run(ctx context.Context, o options) (res *results, err error) {
	if o.n < 1 {
		return nil, fmt.Errorf("-n %d: want at least 1", o.n)
	}
	if o.healthN < 1 || o.chains < 1 || o.chainDepth < 2 {
		return nil, fmt.Errorf("-health-n %d, -chains %d, -chain-depth %d: want at least 1, 1 and 2", o.healthN, o.chains, o.chainDepth)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(o.out) {
		o.out = filepath.Join(root, o.out)
	}
	dir, err := os.MkdirTemp("", "vidra-bench-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if o.keep || err != nil {
			logf("work directory kept: %s (audit.log, vidra.log)", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()

	res = &results{Meta: machine(root, o)}
	res.Meta.LoadAverage = []string{loadAverage()}
	binary, err := operatorBinary(ctx, o, root)
	if err != nil {
		return nil, err
	}

	logf("starting a control plane (audit log of user %s)", operatorUser)
	c, err := startCluster(ctx, dir, o.apiserverPprof)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	res.Meta.Kubernetes = testenv.KubernetesVersion

	logf("creating %d namespaces for Vidra and %d for the baseline", o.n, o.n)
	if err := createNamespaces(ctx, c.kube, "bench", o.n, 16); err != nil {
		return nil, err
	}
	if err := createNamespaces(ctx, c.kube, "periodic", periodicResources, 4); err != nil {
		return nil, err
	}
	if !o.skipBaseline {
		if err := createNamespaces(ctx, c.kube, "base", o.n, 16); err != nil {
			return nil, err
		}
		logf("baseline: kubectl apply --server-side of %d objects", 4*o.n)
		wait := c.profileAPIServer(ctx, o.apiserverPprof, 8*time.Second, filepath.Join(dir, "baseline.apiserver.cpu.pprof"))
		if res.Baseline, err = runBaseline(ctx, c, o.n, o.n, func(i int) string { return withNamespace(appManifest(i), nsName("base", i)) }); err != nil {
			return nil, err
		}
		wait()
		logf("baseline: %d objects in %.2f s (%.1f objects/s)", res.Baseline.Objects, res.Baseline.Seconds, res.Baseline.PerSec)
		if err := releaseServiceIPs(ctx, c.kube, "base", o.n, 16); err != nil {
			return nil, err
		}
	}

	args := splitArgs(o.operatorArgs)
	if o.pprof != "" {
		args = append(args, "--pprof-bind-address="+o.pprof)
	}
	env := splitArgs(o.operatorEnv)
	res.Meta.OperatorCmd = strings.TrimSpace(strings.Join(env, " ") + " vidra --kubeconfig=<user " + operatorUser + "> --namespace=" + operatorNamespace + " " + strings.Join(append(benchFlags(), args...), " "))
	logf("starting the operator: %s", res.Meta.OperatorCmd)
	opStart := time.Now()
	if err := c.startOperator(ctx, binary, args, env); err != nil {
		return nil, err
	}
	tracker := newConvergeTracker("bench", o.n)
	trackCtx, stopTracking := context.WithCancel(ctx)
	defer stopTracking()
	if err := startTracker(trackCtx, c, tracker); err != nil {
		return nil, err
	}

	logf("converge: %d VidraResources", o.n)
	waitAPIServer := c.profileAPIServer(ctx, o.apiserverPprof, 8*time.Second, filepath.Join(dir, "converge.apiserver.cpu.pprof"))
	var profiled chan error
	if o.pprof != "" {
		profiled = make(chan error, 1)
		go func() {
			profiled <- fetch(ctx, "http://"+o.pprof+"/debug/pprof/profile?seconds=20", filepath.Join(dir, "converge.cpu.pprof"))
		}()
	}
	if res.Converge, err = runConverge(ctx, c, tracker, o.n, o.creators, 20*time.Minute); err != nil {
		return nil, err
	}
	waitAPIServer()
	if profiled != nil {
		if err := <-profiled; err != nil {
			logf("CPU profile: %v", err)
		}
	}
	if res.Baseline != nil {
		res.Converge.VsBaseline = round(res.Baseline.Seconds/res.Converge.Seconds, 2)
	}
	logf("converge: %d objects in %.2f s (%.1f objects/s)", res.Converge.Objects, res.Converge.Seconds, res.Converge.PerSec)
	stopTracking()

	if err := settle(ctx, c, 3*time.Second, time.Minute); err != nil {
		return nil, err
	}
	if res.Memory, err = measureMemory(ctx, c, 4*o.n); err != nil {
		return nil, err
	}
	logf("memory: RSS %.1f MiB, heap %.1f MiB, %0.f informers", res.Memory.RSSMiB, res.Memory.HeapAllocMiB, res.Memory.Informers)
	if o.pprof != "" {
		if err := fetch(ctx, "http://"+o.pprof+"/debug/pprof/heap?gc=1", filepath.Join(dir, "converged.heap.pprof")); err != nil {
			logf("heap profile: %v", err)
		}
	}

	logf("idle: counting for %s", o.idleWindow)
	if res.Idle, err = measureIdle(ctx, c, o.idleWindow); err != nil {
		return nil, err
	}
	logf("idle: %d requests (%s), %.1f reconciles/min", res.Idle.Requests.Total, formatCounts(res.Idle.Requests.ByVerb), res.Idle.ReconcilesPerMin)

	logf("churn: %d status-only updates", o.churnUpdates)
	if res.Churn, err = measureChurn(ctx, c, "bench", o.n, o.churnUpdates, 5*time.Second); err != nil {
		return nil, err
	}
	logf("churn: %.0f reconciles, %d requests", res.Churn.Reconciles, res.Churn.Requests.Total)

	h, err := startHub(ctx, c.kube)
	if err != nil {
		return nil, err
	}
	res.Drift.PauseMs = float64(samplePause.Milliseconds())
	logf("drift, event mode: %d samples per kind", o.samples)
	waitDriftProfile := func() {}
	if o.pprof != "" {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := fetch(ctx, "http://"+o.pprof+"/debug/pprof/profile?seconds=15", filepath.Join(dir, "drift.cpu.pprof")); err != nil {
				logf("CPU profile: %v", err)
			}
		}()
		waitDriftProfile = func() { <-done }
	}
	res.Drift.Event, err = measureDrift(ctx, c, h, driftPlan{prefix: "bench", n: o.n, samples: o.samples, timeout: 30 * time.Second, pause: samplePause})
	if err != nil {
		return nil, err
	}
	waitDriftProfile()

	logf("drift, driftPolicy Report: %d resources, one edit each", o.reportSamples)
	report, err := measureReport(ctx, c, o.reportSamples, samplePause)
	if err != nil {
		return nil, err
	}
	res.Drift.Report = map[string]*driftResult{"configmap-data-edited": report}

	// Before the periodic-only resources exist: their re-checks would
	// count among the health section's reconciles, and no quiet moment
	// would come for its windows to start in.
	res.Health, err = measureHealth(ctx, c, healthPlan{n: o.healthN, churn: o.churnUpdates, samples: o.healthSamples,
		chains: o.chains, depth: o.chainDepth, timeout: 2 * time.Minute, pause: samplePause})
	if err != nil {
		return nil, err
	}

	res.Drift.PeriodicInterval = o.periodicEvery.String()
	logf("drift, periodic-only mode (interval %s): %d samples per kind", o.periodicEvery, o.periodicSamples)
	if err := createResources(ctx, c.vidra, "periodic", periodicResources, periodicResources, false, &metav1.Duration{Duration: o.periodicEvery}); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, c, "periodic", periodicResources, 2*time.Minute); err != nil {
		return nil, err
	}
	res.Drift.Periodic, err = measureDrift(ctx, c, h, driftPlan{prefix: "periodic", n: periodicResources, samples: o.periodicSamples,
		timeout: 5*o.periodicEvery + 10*time.Second, pause: samplePause, spread: o.periodicEvery})
	if err != nil {
		return nil, err
	}

	if res.MemoryAtEnd, err = measureMemory(ctx, c, 4*(o.n+periodicResources+o.reportSamples)+o.healthN+o.chains*o.chainDepth); err != nil {
		return nil, err
	}
	time.Sleep(time.Second)
	all, err := auditLog{c.auditLog}.requests(operatorUser, 0, opStart, time.Now())
	if err != nil {
		return nil, err
	}
	res.WatchesByResource = map[string]int{}
	for k, v := range all.ByResource {
		if r, ok := strings.CutPrefix(k, "watch "); ok {
			res.WatchesByResource[r] = v
		}
	}

	c.op.Stop(30 * time.Second)
	if ws := c.op.Wait(0); ws != nil {
		res.Meta.Notes = append(res.Meta.Notes, fmt.Sprintf("the operator's exit after SIGTERM: %v", ws))
	}
	res.Meta.LoadAverage = append(res.Meta.LoadAverage, loadAverage())
	res.checkTargets()
	if err := writeOutputs(o.out, res); err != nil {
		return nil, err
	}
	return res, nil
}

// waitReady waits until n resources of prefix are Ready=True.
func waitReady(ctx context.Context, c *cluster, prefix string, n int, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ready := 0
		for i := range n {
			vr, err := c.vidra.InfrahubV1alpha1().VidraResources(nsName(prefix, i)).Get(ctx, objName, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			if meta.IsStatusConditionTrue(vr.Status.Conditions, v1alpha1.ConditionReady) {
				ready++
			}
		}
		return ready == n, nil
	})
}

// machine describes where and what ran, for the README and the JSON.
func machine(root string, o options) runMeta {
	m := runMeta{
		Date:      time.Now().UTC().Format("2006-01-02"),
		Command:   strings.TrimSpace("go run ./cmd/vidra-bench " + strings.Join(os.Args[1:], " ")),
		GoVersion: runtime.Version(),
		CPUs:      runtime.NumCPU(),
		N:         o.n,
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				m.MemoryGiB = round(kb/(1<<20), 1)
			}
		}
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, _ := cmd.Output()
		return strings.TrimSpace(string(out))
	}
	m.Commit = git("rev-parse", "--short", "HEAD")
	// The operator is built from the working tree, which others edit too:
	// say which of its files differ from the commit.
	for _, line := range strings.Split(git("status", "--porcelain", "--", "cmd", "internal", "pkg", "go.mod", "go.sum"), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasSuffix(line, "_test.go") {
			m.DirtyPaths = append(m.DirtyPaths, line)
		}
	}
	m.Notes = []string{
		"The operator runs as its own process with its default flags unless stated in operatorFlags, under a client certificate of user " + operatorUser + " (group system:masters); requests are counted in the API server's audit log (level Metadata, that user only): a watch once when it starts streaming, anything else when it completes.",
		"Converge: namespaces exist beforehand; the clock starts just before the first of N VidraResources is created (16 parallel clients) and stops when the benchmark's own informers have seen all 4·N objects and N resources Ready=True with the current generation.",
		"Baseline: one kubectl apply --server-side -f of a single multi-document file with the same 4·N objects in N other namespaces, run on the same control plane before the operator starts; kubectl sends one request per object, in sequence. Its Services are deleted before the converge and their cluster IPs released, because allocating a cluster IP costs the API server more the more are allocated: both runs start with the same number.",
		"The install's MutatingAdmissionPolicy (manifests/admission/finalizer_policy.yaml) is in place from the start: VidraResources are created with the finalizer; it matches nothing else.",
		"Drift: one change at a time, sent with the field manager kubectl uses (kubectl-edit, kubectl-scale on the scale subresource, kubectl-label, and a delete); latency is the arrival of the repairing event on the benchmark's watch minus the moment just before the change request; 50 ms pause between samples, and in periodic-only mode a random wait of up to one interval before each change, so that changes land at random phases of the re-check. driftPolicy Report: resources of their own, one kubectl-edit of the ConfigMap's data each; latency is the arrival of the VidraResource's watch event listing it in status.drift.",
		"Churn: merge patches of Deployments' /status (observedGeneration equal to the generation, the Progressing condition's lastUpdateTime moved on; health stays InProgress as without a status), field manager bench-deployment-controller; counted until 5 s after the last one.",
		"Health: the control plane runs no deployment controller, so the benchmark writes the Deployments' /status itself (merge patches, field manager bench-deployment-controller): one replica rolled out and available (Current) or its Pod not ready (InProgress, Available: 0/1). Status churn keeping health moves only the conditions' lastUpdateTime and ends with a barrier, one health-changing write whose parent status update is awaited on a watch; the barrier's reconcile and status write are subtracted. A transition is timed from the answer to the Deployment's status write to the arrival of the parent's update showing the new health (Healthy condition and managedResources entry) on the benchmark's watch, one at a time, 50 ms apart. Chains: every dependent is created first and left DependencyNotReady; the heads are then created together and each resource's Ready=True is taken from the watch.",
	}
	return m
}

// fetch saves what url answers to path; the profiles of an investigation.
func fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// loadAverage is the 1, 5 and 15 minute load average.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// operatorBinary is the vidra binary the run measures: -vidra's, or
// cmd/vidra built into bin/bench.
func operatorBinary(ctx context.Context, o options, root string) (string, error) {
	if o.vidra != "" {
		return o.vidra, nil
	}
	binary := filepath.Join(root, "bin", "bench", "vidra")
	logf("building %s", binary)
	return binary, testenv.BuildVidra(ctx, binary, false)
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/shard"
	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// The scale run: -replicas 1,2,3 converges n resources once per replica
// count, each on a fresh control plane, and measures what docs/scaling.md
// reports: converge rate, RSS per replica, drift repair with every object
// watched, idle cost, a restart (one replica) and the handoff after a
// SIGKILL (several).

const (
	scalePrefix = "scale"
	// perNamespace resources share a namespace: ten thousand namespaces
	// would measure the namespace controller, not Vidra.
	perNamespace = 100
	scaleLease   = 5 * time.Second
)

type scaleResult struct {
	Meta    runMeta `json:"meta"`
	N       int     `json:"n"`
	Objects int     `json:"objects"`
	// Baseline is kubectl apply --server-side of the same objects, on a
	// fresh control plane of its own before the runs.
	Baseline *baselineResult `json:"baseline,omitempty"`
	// Floor (-floor) is the same converge by a client that sends only
	// Vidra's requests, on a fresh control plane of its own.
	Floor *floorResult `json:"floor,omitempty"`
	Runs  []*scaleRun  `json:"runs"`
}

// scaleRun is one replica count's figures.
type scaleRun struct {
	Replicas        int     `json:"replicas"`
	ConvergeSeconds float64 `json:"convergeSeconds"`
	ObjectsPerSec   float64 `json:"objectsPerSecond"`
	// VsBaseline is kubectl's time over the converge's: above 1 is faster.
	VsBaseline     float64   `json:"vsBaseline,omitempty"`
	RSSMiB         []float64 `json:"rssMiBPerReplica"`
	KeysPerReplica []float64 `json:"keysPerReplica"`
	CPUPerResource float64   `json:"operatorCPUMsPerResource"`
	// ControlPlaneCPU is what each control plane process used per
	// resource during the converge, in milliseconds, and the bench's own
	// process ("bench": the creates and the converge tracker).
	ControlPlaneCPU map[string]float64 `json:"controlPlaneCPUMsPerResource"`
	// GCShare is the part of that CPU the garbage collector took.
	GCShare float64 `json:"gcShare"`
	// DoubleApplies are objects applied (successfully) more than once
	// during the converge, from the audit log.
	DoubleApplies int         `json:"doubleApplies"`
	Requests      int         `json:"operatorRequestsDuringConverge"`
	Drift         latencyStat `json:"configMapDeletedRepairMs"`
	// DriftSeen is the part of Drift until the delete's own event reached
	// a watch of the bench's: the API server's share, which the operator's
	// informers wait for as well.
	DriftSeen latencyStat `json:"configMapDeletedSeenMs"`
	// DriftFloor is the same repair by a bare watch and one apply of the
	// bench's, of ConfigMaps Vidra does not manage, its samples taken
	// between Vidra's: the least any operator's repair can take there.
	// DriftFloorSeen is its DriftSeen.
	DriftFloor     latencyStat `json:"configMapDeletedRepairFloorMs"`
	DriftFloorSeen latencyStat `json:"configMapDeletedSeenFloorMs"`
	IdleRequests   int         `json:"idleRequests"`
	IdleReconciles float64     `json:"idleReconciles"`
	// RestartSeconds (one replica): from the new process's start to every
	// resource reconciled; RestartWrites its writes meanwhile.
	RestartSeconds float64 `json:"restartVerifiedSeconds,omitempty"`
	RestartWrites  int     `json:"restartWrites"`
	// HandoffSeconds (several): from the SIGKILL of a replica to a deleted
	// object of one of its resources restored by another.
	HandoffSeconds float64 `json:"handoffSeconds,omitempty"`
	// HandoffGained are the resources the survivors took over, and
	// HandoffReconciles the reconciles they ran from the SIGKILL until
	// they were quiet: about the resources gained when they verify only
	// those, and not again the ones they kept.
	HandoffGained     float64 `json:"handoffResourcesGained,omitempty"`
	HandoffReconciles float64 `json:"handoffReconciles,omitempty"`
	Lost              int     `json:"resourcesNotReadyAfter"`
}

func scaleManifest(i int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: app-%05[1]d
data:
  greeting: hello-%[1]d
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: app-%05[1]d
---
apiVersion: v1
kind: Service
metadata:
  name: app-%05[1]d
spec:
  selector:
    app: app-%05[1]d
  ports:
  - port: 80
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%05[1]d
spec:
  replicas: 0
  selector:
    matchLabels:
      app: app-%05[1]d
  template:
    metadata:
      labels:
        app: app-%05[1]d
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
`, i)
}

func scaleKey(i int) cache.ObjectName {
	return cache.ObjectName{Namespace: nsName(scalePrefix, i/perNamespace), Name: fmt.Sprintf("app-%05d", i)}
}

func runScale(ctx context.Context, o options) (*scaleResult, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	binary, err := operatorBinary(ctx, o, root)
	if err != nil {
		return nil, err
	}
	res := &scaleResult{Meta: machine(root, o), N: o.n, Objects: 4 * o.n}
	res.Meta.LoadAverage = []string{loadAverage()}
	res.Meta.OperatorCmd = strings.Join(append(benchFlags(), splitArgs(o.operatorArgs)...), " ")
	if !o.skipBaseline {
		if res.Baseline, err = scaleBaseline(ctx, o); err != nil {
			return nil, fmt.Errorf("baseline: %w", err)
		}
	}
	if o.floor {
		if res.Floor, err = scaleFloor(ctx, o); err != nil {
			return nil, fmt.Errorf("floor: %w", err)
		}
		if res.Baseline != nil {
			res.Floor.VsBaseline = round(res.Baseline.Seconds/res.Floor.Seconds, 2)
		}
	}
	for _, r := range o.replicas {
		run, err := scaleOnce(ctx, o, binary, r)
		if err != nil {
			return nil, fmt.Errorf("%d replicas: %w", r, err)
		}
		if res.Baseline != nil {
			run.VsBaseline = round(res.Baseline.Seconds/run.ConvergeSeconds, 2)
		}
		res.Runs = append(res.Runs, run)
	}
	res.Meta.LoadAverage = append(res.Meta.LoadAverage, loadAverage())
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, err
	}
	return res, os.WriteFile(filepath.Join(o.out, "scale-latest.json"), data, 0o644)
}

// scaleBaseline times kubectl apply --server-side of the scale run's
// objects, in namespaces of the same size, on a control plane of its own
// so that neither its objects nor their cleanup weigh on the runs.
func scaleBaseline(ctx context.Context, o options) (*baselineResult, error) {
	c, cleanup, err := scaleCluster(ctx, o, "base", false)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	namespaces := (o.n + perNamespace - 1) / perNamespace
	logf("scale baseline: kubectl apply --server-side of %d objects", 4*o.n)
	b, err := runBaseline(ctx, c, o.n, namespaces, func(i int) string {
		return withNamespace(scaleManifest(i), scaleKey(i).Namespace)
	})
	if err != nil {
		return nil, err
	}
	logf("scale baseline: %d objects in %.1f s (%.0f objects/s)", b.Objects, b.Seconds, b.PerSec)
	return b, nil
}

// scaleCluster starts a fresh control plane in a work directory of its own,
// with the scale run's namespaces, for one part of the run (name). cleanup
// stops it and removes the directory, unless -keep.
func scaleCluster(ctx context.Context, o options, name string, profiling bool) (c *cluster, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "vidra-scale-")
	if err != nil {
		return nil, nil, err
	}
	removeDir := func() {
		if !o.keep {
			_ = os.RemoveAll(dir)
		}
	}
	logf("scale, %s: starting a control plane", name)
	if c, err = startCluster(ctx, dir, profiling); err != nil {
		removeDir()
		return nil, nil, err
	}
	cleanup = func() {
		c.stop()
		removeDir()
	}
	if err := createNamespaces(ctx, c.kube, scalePrefix, (o.n+perNamespace-1)/perNamespace, 16); err != nil {
		cleanup()
		return nil, nil, err
	}
	return c, cleanup, nil
}

func scaleOnce(ctx context.Context, o options, binary string, replicas int) (*scaleRun, error) {
	c, cleanup, err := scaleCluster(ctx, o, fmt.Sprintf("%d replicas", replicas), o.apiserverPprof)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	dir := c.dir
	var ops []*testenv.VidraProcess
	defer func() {
		for _, op := range ops {
			op.Stop(15 * time.Second)
		}
	}()
	ids := make([]string, replicas)
	start := func(i int) (*testenv.VidraProcess, error) {
		args := append(benchFlags(), splitArgs(o.operatorArgs)...)
		if replicas > 1 {
			args = append(args, "--sharding", "--shard-identity="+ids[i], "--shard-lease-duration="+scaleLease.String(), "--shard-renew-period=1s")
		}
		if o.pprof != "" && i == 0 {
			args = append(args, "--pprof-bind-address="+o.pprof)
		}
		op, err := testenv.StartVidra(testenv.VidraOptions{Binary: binary, Kubeconfig: c.kubeconfig, Namespace: operatorNamespace,
			LogPath: filepath.Join(dir, fmt.Sprintf("vidra-%d.log", i)), Args: args})
		if err != nil {
			return nil, err
		}
		return op, op.WaitReady(ctx, 2*time.Minute)
	}
	for i := range replicas {
		ids[i] = fmt.Sprintf("replica-%d", i)
		op, err := start(i)
		if op != nil {
			ops = append(ops, op)
		}
		if err != nil {
			return nil, err
		}
	}
	if replicas > 1 {
		if err := waitScaleMembers(ctx, ops, replicas); err != nil {
			return nil, err
		}
	}
	c.op = ops[0]

	run := &scaleRun{Replicas: replicas}
	audit := auditLog{c.auditLog}
	mark, from := audit.mark(), time.Now()
	cpuBefore := 0.0
	for _, op := range ops {
		cpuBefore += cpuSeconds(op.PID())
	}
	gcBefore := sumMetric(ctx, ops, gcSeconds)
	cp0, self0 := c.cpu(), cpuSeconds(os.Getpid())
	tracker := newConvergeTracker(scalePrefix, o.n)
	trackCtx, stopTracking := context.WithCancel(ctx)
	defer stopTracking()
	if err := startTracker(trackCtx, c, tracker); err != nil {
		return nil, err
	}
	logf("scale, %d replicas: converging %d resources (%d objects)", replicas, o.n, 4*o.n)
	began := time.Now()
	var profiled chan error
	if o.pprof != "" {
		// A CPU profile of the first replica from the middle of the
		// converge, where the caches hold half the objects.
		profiled = make(chan error, 1)
		go func() {
			_ = wait.PollUntilContextCancel(trackCtx, time.Second, true, func(context.Context) (bool, error) {
				return tracker.progress() >= o.n/2, nil
			})
			profiled <- fetch(ctx, "http://"+o.pprof+"/debug/pprof/profile?seconds=30", filepath.Join(dir, fmt.Sprintf("converge-%d.cpu.pprof", replicas)))
		}()
	}
	// kube-apiserver's CPU profile over the converge's first seconds,
	// beside the floor's (-floor) over the same span.
	waitAPIServer := c.profileAPIServer(ctx, o.apiserverPprof, 10*time.Second, filepath.Join(dir, fmt.Sprintf("converge-%d.apiserver.cpu.pprof", replicas)))
	defer waitAPIServer()
	err = parallelDo(ctx, o.n, o.creators, func(ctx context.Context, i int) error {
		vr := scaleResource(i)
		_, err := c.vidra.InfrahubV1alpha1().VidraResources(vr.Namespace).Create(ctx, vr, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	select {
	case <-tracker.done:
	case <-time.After(time.Hour):
		return nil, fmt.Errorf("not converged within an hour: %d of %d Ready", tracker.progress(), o.n)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if profiled != nil {
		if err := <-profiled; err != nil {
			logf("CPU profile: %v", err)
		}
		if err := fetch(ctx, "http://"+o.pprof+"/debug/pprof/heap?gc=1", filepath.Join(dir, fmt.Sprintf("converged-%d.heap.pprof", replicas))); err != nil {
			logf("heap profile: %v", err)
		}
		logf("profiles in %s", dir)
	}
	stopTracking()
	took := tracker.doneAt.Sub(began)
	run.ConvergeSeconds = round(took.Seconds(), 2)
	run.ObjectsPerSec = round(float64(4*o.n)/took.Seconds(), 1)
	cpuAfter := 0.0
	for _, op := range ops {
		cpuAfter += cpuSeconds(op.PID())
	}
	run.CPUPerResource = round((cpuAfter-cpuBefore)*1000/float64(o.n), 2)
	run.ControlPlaneCPU = perResource(c.cpu().since(cp0), o.n)
	delete(run.ControlPlaneCPU, "vidra") // one replica's; CPUPerResource has them all
	// The bench's own process: the resources' creates and the tracker.
	run.ControlPlaneCPU["bench"] = round((cpuSeconds(os.Getpid())-self0)*1000/float64(o.n), 2)
	run.GCShare = gcShare(sumMetric(ctx, ops, gcSeconds)-gcBefore, cpuAfter-cpuBefore)
	logf("scale, %d replicas: converged in %.1f s (%.0f objects/s)", replicas, took.Seconds(), run.ObjectsPerSec)
	for _, op := range ops {
		if err := settleOp(ctx, op, 3*time.Second, 2*time.Minute); err != nil {
			return nil, err
		}
	}
	time.Sleep(time.Second) // the audit log trails the responses a little
	if run.DoubleApplies, run.Requests, err = doubleApplies(c.auditLog, mark, from); err != nil {
		return nil, err
	}
	for _, op := range ops {
		rss, _, err := op.RSSBytes()
		if err != nil {
			return nil, err
		}
		run.RSSMiB = append(run.RSSMiB, round(float64(rss)/(1<<20), 1))
		m, err := op.Metrics(ctx)
		if err != nil {
			return nil, err
		}
		keys := float64(o.n)
		if replicas > 1 {
			keys = m.Sum("vidra_shard_keys", nil)
		}
		run.KeysPerReplica = append(run.KeysPerReplica, keys)
	}
	logf("scale, %d replicas: RSS %v MiB, keys %v, %d objects applied twice", replicas, run.RSSMiB, run.KeysPerReplica, run.DoubleApplies)

	// Idle: nothing but watches, no reconcile.
	before := sumMetric(ctx, ops, "vidra_reconciles_total")
	mark, from = audit.mark(), time.Now()
	select {
	case <-time.After(o.idleWindow):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	time.Sleep(time.Second)
	idle, err := audit.requests(operatorUser, mark, from, time.Now().Add(-time.Second))
	if err != nil {
		return nil, err
	}
	run.IdleRequests = idle.Total - idle.ByVerb["watch"]
	run.IdleReconciles = sumMetric(ctx, ops, "vidra_reconciles_total") - before
	logf("scale, %d replicas: idle %s: %d requests besides watches, %.0f reconciles", replicas, o.idleWindow, run.IdleRequests, run.IdleReconciles)

	// Drift: ConfigMaps deleted, one at a time, with every object watched;
	// each of Vidra's samples is followed by one of the floor's, so that the
	// two meet the same machine.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	floor, err := startDriftFloor(ctx, c, o.n, o.scaleDriftSamples, rng)
	if err != nil {
		return nil, err
	}
	var lat, seenLat, floorLat, floorSeenLat []float64
	err = func() error {
		defer floor.close(ctx)
		for j := range o.scaleDriftSamples {
			key := scaleKey(rng.IntN(o.n))
			d, seen, err := timeRepair(ctx, c, key, 30*time.Second)
			if err := addSample(d, seen, err, &lat, &seenLat); err != nil {
				return err
			}
			time.Sleep(samplePause)
			d, seen, err = floor.sample(ctx, j)
			if err := addSample(d, seen, err, &floorLat, &floorSeenLat); err != nil {
				return fmt.Errorf("drift floor: %w", err)
			}
			time.Sleep(samplePause)
		}
		return nil
	}()
	if err != nil {
		return nil, err
	}
	run.Drift, run.DriftSeen = stats(lat), stats(seenLat)
	run.DriftFloor, run.DriftFloorSeen = stats(floorLat), stats(floorSeenLat)
	logf("scale, %d replicas: ConfigMap deleted → restored p50 %.1f ms, p99 %.1f ms; the delete's event seen p50 %.1f ms, p99 %.1f ms",
		replicas, run.Drift.P50, run.Drift.P99, run.DriftSeen.P50, run.DriftSeen.P99)
	logf("scale, %d replicas: the same repair by a bare watch and one apply: p50 %.1f ms, p99 %.1f ms; the delete's event seen p50 %.1f ms",
		replicas, run.DriftFloor.P50, run.DriftFloor.P99, run.DriftFloorSeen.P50)

	if replicas == 1 {
		// Restart: a new process re-verifies every resource from its
		// caches and writes nothing.
		ops[0].Stop(30 * time.Second)
		mark, from = audit.mark(), time.Now()
		op, err := start(0)
		if err != nil {
			return nil, err
		}
		ops[0], c.op = op, op
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
			m, err := op.Metrics(ctx)
			return err == nil && m.Sum("vidra_reconciles_total", map[string]string{"trigger": "startup"}) >= float64(o.n), nil
		})
		if err != nil {
			return nil, fmt.Errorf("the restarted operator did not reconcile every resource: %w", err)
		}
		run.RestartSeconds = round(time.Since(from).Seconds(), 2)
		if err := settleOp(ctx, op, 3*time.Second, 2*time.Minute); err != nil {
			return nil, err
		}
		time.Sleep(time.Second)
		rc, err := audit.requests(operatorUser, mark, from, time.Now().Add(-time.Second))
		if err != nil {
			return nil, err
		}
		run.RestartWrites = rc.Writes
		logf("scale, restart: every resource verified %.1f s after the start, %d writes (%s)", run.RestartSeconds, rc.Writes, formatCounts(rc.ByVerb))
	} else {
		// Handoff: SIGKILL replica-1, break one of its resources.
		victim := -1
		for i := range o.n {
			if shard.Owner(shard.Bucket(scaleKey(i)), ids) == ids[1] {
				victim = i
				break
			}
		}
		// Profiles of the handoff: a survivor (replica-0, the one -pprof
		// serves) and the API server, over the Lease's expiry and after.
		var handoffProfiled chan error
		if o.pprof != "" {
			handoffProfiled = make(chan error, 1)
			go func() {
				handoffProfiled <- fetch(ctx, "http://"+o.pprof+"/debug/pprof/profile?seconds=15", filepath.Join(dir, fmt.Sprintf("handoff-%d.cpu.pprof", replicas)))
			}()
		}
		waitAPIServer := c.profileAPIServer(ctx, o.apiserverPprof, 15*time.Second, filepath.Join(dir, fmt.Sprintf("handoff-%d.apiserver.cpu.pprof", replicas)))
		survivors := slices.Concat(ops[:1], ops[2:])
		keysBefore := sumMetric(ctx, survivors, "vidra_shard_keys")
		reconcilesBefore := sumMetric(ctx, survivors, "vidra_reconciles_total")
		if err := ops[1].Signal(syscall.SIGKILL); err != nil {
			return nil, err
		}
		killed := time.Now()
		key := scaleKey(victim)
		if err := c.kube.CoreV1().ConfigMaps(key.Namespace).Delete(ctx, key.Name, metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.kube.CoreV1().ConfigMaps(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			return nil, fmt.Errorf("the killed replica's object was not restored: %w", err)
		}
		run.HandoffSeconds = round(time.Since(killed).Seconds(), 2)
		waitAPIServer()
		if handoffProfiled != nil {
			if err := <-handoffProfiled; err != nil {
				logf("CPU profile: %v", err)
			}
		}
		ops = survivors
		logf("scale, %d replicas: a resource of the SIGKILLed replica was served again %.2f s after the kill (lease %s)", replicas, run.HandoffSeconds, scaleLease)
		for _, op := range survivors {
			if err := settleOp(ctx, op, 3*time.Second, 2*time.Minute); err != nil {
				return nil, err
			}
		}
		run.HandoffGained = sumMetric(ctx, survivors, "vidra_shard_keys") - keysBefore
		run.HandoffReconciles = sumMetric(ctx, survivors, "vidra_reconciles_total") - reconcilesBefore
		logf("scale, %d replicas: the survivors took over %.0f resources and kept %.0f; %.0f reconciles since the kill", replicas, run.HandoffGained, keysBefore, run.HandoffReconciles)
	}
	// Nothing lost: every resource Ready.
	list, err := c.vidra.InfrahubV1alpha1().VidraResources("").List(ctx, metav1.ListOptions{LabelSelector: benchLabel + "=scale"})
	if err != nil {
		return nil, err
	}
	for _, vr := range list.Items {
		if !meta.IsStatusConditionTrue(vr.Status.Conditions, v1alpha1.ConditionReady) {
			run.Lost++
		}
	}
	return run, nil
}

func waitScaleMembers(ctx context.Context, ops []*testenv.VidraProcess, n int) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, op := range ops {
			m, err := op.Metrics(ctx)
			if err != nil || m.Sum("vidra_shard_members", nil) != float64(n) || m.Sum("vidra_shard_buckets", nil) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

func sumMetric(ctx context.Context, ops []*testenv.VidraProcess, name string) float64 {
	total := 0.0
	for _, op := range ops {
		if m, err := op.Metrics(ctx); err == nil {
			total += m.Sum(name, nil)
		}
	}
	return total
}

// settleOp waits until op's reconcile counter has stood still for quiet.
func settleOp(ctx context.Context, op *testenv.VidraProcess, quiet, limit time.Duration) error {
	return settle(ctx, &cluster{op: op}, quiet, limit)
}

// addSample records a repair timed by timeRepair. A watch the API server
// closed (a timeout of its own) loses the sample, not the run.
func addSample(d, seen time.Duration, err error, lat, seenLat *[]float64) error {
	switch {
	case errors.Is(err, errWatchEnded):
		logf("  %v; sample skipped", err)
		return nil
	case err != nil:
		return err
	}
	*lat = append(*lat, ms(d))
	if seen > 0 {
		*seenLat = append(*seenLat, ms(seen))
	}
	return nil
}

// errWatchEnded: the API server closed a sample's watch before the repair.
var errWatchEnded = errors.New("the watch ended before the repair")

// timeRepair deletes the ConfigMap of key and times its return, and the
// arrival of the delete's own event on the same watch (zero if unseen).
func timeRepair(ctx context.Context, c *cluster, key cache.ObjectName, timeout time.Duration) (repaired, seen time.Duration, err error) {
	cms := c.kube.CoreV1().ConfigMaps(key.Namespace)
	// No resourceVersion: a watch from one a Get returned can be refused
	// by a watch cache that lags a busy API server. The watch begins with
	// the object as it is, whose UID tells the restored one apart.
	w, err := cms.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + key.Name})
	if err != nil {
		return 0, 0, err
	}
	defer w.Stop()
	var cm *corev1.ConfigMap
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			return 0, 0, fmt.Errorf("%w: %s", errWatchEnded, key)
		}
		if cm, ok = ev.Object.(*corev1.ConfigMap); !ok || ev.Type != "ADDED" {
			return 0, 0, fmt.Errorf("%w: %s began with %s", errWatchEnded, key, ev.Type)
		}
	case <-time.After(timeout):
		return 0, 0, fmt.Errorf("ConfigMap %s: no initial event within %s", key, timeout)
	}
	start := time.Now()
	if err := cms.Delete(ctx, key.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID}}); err != nil && !apierrors.IsNotFound(err) {
		return 0, 0, err
	}
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				// Restore what the sample deleted before giving up on it.
				_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
					_, err := cms.Get(ctx, key.Name, metav1.GetOptions{})
					return err == nil, nil
				})
				return 0, 0, fmt.Errorf("%w: %s", errWatchEnded, key)
			}
			if ev.Type == "DELETED" && seen == 0 {
				seen = time.Since(start)
			}
			if got, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == "ADDED" && got.UID != cm.UID {
				return time.Since(start), seen, nil
			}
		case <-deadline:
			return 0, 0, fmt.Errorf("ConfigMap %s not restored within %s", key, timeout)
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
}

// doubleApplies counts, in the audit log from offset on, the operator's
// requests and the objects it applied successfully more than once.
func doubleApplies(path string, offset int64, from time.Time) (doubles, requests int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, 0, err
	}
	type entry struct {
		Stage     string                    `json:"stage"`
		Verb      string                    `json:"verb"`
		User      struct{ Username string } `json:"user"`
		ObjectRef *struct {
			Resource, Namespace, Name, Subresource string
		} `json:"objectRef"`
		ResponseStatus *struct {
			Code int `json:"code"`
		} `json:"responseStatus"`
		RequestReceived time.Time `json:"requestReceivedTimestamp"`
	}
	applied := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 256*1024), 16*1024*1024)
	for sc.Scan() {
		var e entry
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.User.Username != operatorUser || e.Stage != "ResponseComplete" || e.RequestReceived.Before(from) {
			continue
		}
		requests++
		if e.Verb != "patch" || e.ObjectRef == nil || e.ObjectRef.Subresource != "" || e.ResponseStatus == nil || e.ResponseStatus.Code >= 300 {
			continue
		}
		switch e.ObjectRef.Resource {
		case "configmaps", "serviceaccounts", "services", "deployments":
			applied[e.ObjectRef.Resource+"/"+e.ObjectRef.Namespace+"/"+e.ObjectRef.Name]++
		}
	}
	for _, n := range applied {
		if n > 1 {
			doubles++
		}
	}
	return doubles, requests, sc.Err()
}

// scaleMarkdown is the table of a scale run.
func scaleMarkdown(r *scaleResult) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("\n## Scale: %d VidraResources × 4 objects (%d objects)\n\n", r.N, r.Objects)
	p("`go run ./cmd/vidra-bench -replicas %s -n %d` · %d CPUs (%s) · commit %s · load average at start / end: %s\n\n",
		joinInts(r.Runs), r.N, r.Meta.CPUs, r.Meta.CPUModel, r.Meta.Commit, strings.Join(r.Meta.LoadAverage, " / "))
	p("Operator flags: `%s`.\n\n", r.Meta.OperatorCmd)
	if r.Baseline != nil {
		p("Baseline, on a control plane of its own: `%s`: %.1f s, %.0f objects/s.\n\n", r.Baseline.Command, r.Baseline.Seconds, r.Baseline.PerSec)
	}
	if f := r.Floor; f != nil {
		vs := ""
		if f.VsBaseline > 0 {
			vs = fmt.Sprintf(" (%.2f× kubectl)", f.VsBaseline)
		}
		p("Floor, on a control plane of its own: Vidra's requests sent by a client that does nothing else: %.1f s%s, %.0f objects/s, %d requests; control plane CPU ms per resource: %s.\n\n",
			f.Seconds, vs, f.PerSec, f.Requests, cpuList(f.CPUMsPerResource))
	}
	p("| replicas | converge s | vs kubectl | objects/s | CPU ms per resource (GC share) | RSS per replica MiB | resources per replica | objects applied twice | ConfigMap deleted → restored p50 / p99 ms (delete's event seen p50; floor p50 / p99) | idle requests / reconciles | restart: verified s, writes | SIGKILL → served again s | not Ready after |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range r.Runs {
		restart, handoff := "–", "–"
		if run.Replicas == 1 {
			restart = fmt.Sprintf("%.1f, %d", run.RestartSeconds, run.RestartWrites)
		} else {
			handoff = fmt.Sprintf("%.2f (%.0f reconciles for %.0f resources gained)", run.HandoffSeconds, run.HandoffReconciles, run.HandoffGained)
		}
		vs := "–"
		if run.VsBaseline > 0 {
			vs = fmt.Sprintf("%.2f×", run.VsBaseline)
		}
		p("| %d | %.1f | %s | %.0f | %.2f (%.0f %%) | %s | %s | %d | %.1f / %.1f (%.1f; %.1f / %.1f) | %d / %.0f | %s | %s | %d |\n", run.Replicas, run.ConvergeSeconds, vs, run.ObjectsPerSec, run.CPUPerResource, run.GCShare*100,
			floats(run.RSSMiB), floats(run.KeysPerReplica), run.DoubleApplies, run.Drift.P50, run.Drift.P99, run.DriftSeen.P50, run.DriftFloor.P50, run.DriftFloor.P99, run.IdleRequests, run.IdleReconciles, restart, handoff, run.Lost)
	}
	for _, run := range r.Runs {
		p("Control plane CPU ms per resource during the converge of %d replicas: %s.\n", run.Replicas, cpuList(run.ControlPlaneCPU))
	}
	return b.String()
}

// cpuList is "name ms, ..." sorted by name.
func cpuList(m map[string]float64) string {
	names := slices.Sorted(maps.Keys(m))
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = fmt.Sprintf("%s %.1f", n, m[n])
	}
	return strings.Join(s, ", ")
}

func joinInts(runs []*scaleRun) string {
	var s []string
	for _, r := range runs {
		s = append(s, strconv.Itoa(r.Replicas))
	}
	return strings.Join(s, ",")
}

func floats(v []float64) string {
	s := make([]string, len(v))
	for i, f := range v {
		s[i] = strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strings.Join(s, ", ")
}

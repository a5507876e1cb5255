// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/vidra-operator/vidra/internal/infrahub/standin"
	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// infrahubNamespace holds the sync, its credentials, its VidraResources and
// their ConfigMaps.
const infrahubNamespace = "ihb"

// defaultSyncInterval is the default spec.interval of an InfrahubSync (the
// configuration's requeueSyncAfter), for the per-hour extrapolation.
const defaultSyncInterval = time.Minute

// infrahubResult is what the InfrahubSync section measured.
type infrahubResult struct {
	Meta      runMeta `json:"meta"`
	Artifacts int     `json:"artifacts"`
	Interval  string  `json:"interval"`
	// ConvergeSeconds is the time from the sync's creation to every
	// artifact's ConfigMap in the cluster.
	ConvergeSeconds float64 `json:"convergeSeconds"`
	// Change is the time from SetArtifact at the stand-in to the watch
	// event of the changed ConfigMap; FromPoll from the start of the poll
	// that saw the change to that event.
	Change   latencyStat  `json:"changeToObjectMs"`
	FromPoll latencyStat  `json:"pollToObjectMs"`
	Samples  int          `json:"samples"`
	Idle     idleInfrahub `json:"idle"`
	// MemoryBefore is the operator's with no sync, MemoryAfter with the
	// sync's artifacts applied; both right after a forced collection.
	MemoryBefore *memoryResult `json:"memoryBefore"`
	MemoryAfter  *memoryResult `json:"memoryAfter"`
}

// idleInfrahub is what an idle sync asked of Infrahub over a window.
type idleInfrahub struct {
	WindowSeconds float64        `json:"windowSeconds"`
	Counts        standin.Counts `json:"requests"`
	Polls         int            `json:"polls"`
	PerHour       float64        `json:"requestsPerHourAtInterval"`
	PerHourAt1m   float64        `json:"requestsPerHourAtDefaultInterval"`
	KubeRequests  requestCount   `json:"kubernetesRequests"`
}

// pollRecorder notes when each query (a poll) reached the stand-in, from
// its counters read every millisecond: the operator talks to the stand-in
// directly, as it would to Infrahub.
type pollRecorder struct {
	mu    sync.Mutex
	polls []time.Time
}

func (p *pollRecorder) run(ctx context.Context, s *standin.Server) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	seen := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c := s.Counts()
		// ResetCounts (the idle window) starts the count again.
		if n := c.Query + c.GraphQL; n != seen {
			if n > seen {
				p.mu.Lock()
				p.polls = append(p.polls, time.Now())
				p.mu.Unlock()
			}
			seen = n
		}
	}
}

// lastBefore is the start of the latest poll before t.
func (p *pollRecorder) lastBefore(t time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.polls) - 1; i >= 0; i-- {
		if p.polls[i].Before(t) {
			return p.polls[i], true
		}
	}
	return time.Time{}, false
}

func configMapContent(i int, value string) []byte {
	return fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: art-%03d\ndata:\n  value: %q\n", i, value)
}

func artifactID(i int) string { return fmt.Sprintf("art-%03d", i) }

// runInfrahub measures an InfrahubSync of o.infrahubN artifacts on a control
// plane of its own: change latency, idle requests to Infrahub and the
// operator's extra memory.
func runInfrahub(ctx context.Context, o options) (res *infrahubResult, err error) {
	if o.infrahubN < 1 || o.infrahubSamples < 1 || o.infrahubInterval < time.Second {
		return nil, fmt.Errorf("-infrahub-n %d, -infrahub-samples %d, -infrahub-interval %s: want at least 1, 1 and 1s", o.infrahubN, o.infrahubSamples, o.infrahubInterval)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(o.out) {
		o.out = filepath.Join(root, o.out)
	}
	dir, err := os.MkdirTemp("", "vidra-bench-infrahub-")
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
	res = &infrahubResult{Meta: machine(root, o), Artifacts: o.infrahubN, Interval: o.infrahubInterval.String(), Samples: o.infrahubSamples}
	res.Meta.N = o.infrahubN
	res.Meta.Notes = []string{
		"InfrahubSync: the stand-in Infrahub (internal/infrahub/standin) runs in the benchmark's process, its counters read every millisecond to tell when each query arrived; the operator runs as its own process with --allow-http-destinations and reaches it on the loopback. One sync, artefactName of N artifacts, each one ConfigMap, username/password credentials.",
		"Change latency: one artifact at a time gets new content (SetArtifact) after a random wait of up to one interval; the clock stops at the ConfigMap's watch event carrying the new value. 'From poll' starts at the arrival of the latest query before that event.",
		"Idle: counts at the stand-in after every change is applied; Kubernetes requests of the operator from the API server's audit log over the same window.",
		"Memory: the operator's RSS and heap (after a collection forced through /debug/pprof/heap?gc=1) before the sync is created and after its artifacts are applied and the operator is quiet.",
	}
	binary, err := operatorBinary(ctx, o, root)
	if err != nil {
		return nil, err
	}

	logf("starting a control plane")
	c, err := startCluster(ctx, dir, false)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	res.Meta.Kubernetes = testenv.KubernetesVersion
	if err := testenv.InstallCRDs(ctx, c.env.Config, filepath.Join(root, "manifests/crd/infrahub.operators.com_infrahubsyncs.yaml")); err != nil {
		return nil, err
	}
	if err := createNamespaces(ctx, c.kube, infrahubNamespace, 1, 1); err != nil {
		return nil, err
	}
	ns := nsName(infrahubNamespace, 0)

	s := standin.New(standin.Options{})
	s.AddUser("vidra", "s3cret")
	for i := range o.infrahubN {
		s.SetArtifact("", standin.Artifact{ID: artifactID(i), Name: "device-config", Definition: "device-configs", Content: configMapContent(i, "v0")})
	}
	s.Start()
	defer s.Close()
	rec := &pollRecorder{}
	recCtx, stopRec := context.WithCancel(ctx)
	defer stopRec()
	go rec.run(recCtx, s)

	pprofAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := append(splitArgs(o.operatorArgs), "--allow-http-destinations", "--pprof-bind-address="+pprofAddr)
	env := splitArgs(o.operatorEnv)
	res.Meta.OperatorCmd = strings.TrimSpace(strings.Join(env, " ") + " vidra --kubeconfig=<user " + operatorUser + "> --namespace=" + operatorNamespace + " " + strings.Join(append(benchFlags(), args...), " "))
	logf("starting the operator: %s", res.Meta.OperatorCmd)
	if err := c.startOperator(ctx, binary, args, env); err != nil {
		return nil, err
	}
	if err := settle(ctx, c, 3*time.Second, time.Minute); err != nil {
		return nil, err
	}
	if res.MemoryBefore, err = memoryAfterGC(ctx, c, pprofAddr, 0); err != nil {
		return nil, err
	}
	logf("memory before: RSS %.1f MiB, heap %.1f MiB", res.MemoryBefore.RSSMiB, res.MemoryBefore.HeapAllocMiB)

	if _, err := c.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "infrahub"},
		StringData: map[string]string{"username": "vidra", "password": "s3cret"},
	}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	logf("converge: a sync of %d artifacts, interval %s", o.infrahubN, o.infrahubInterval)
	start := time.Now()
	if _, err := c.vidra.InfrahubV1alpha1().InfrahubSyncs(ns).Create(ctx, &v1alpha1.InfrahubSync{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: ns},
		Spec: v1alpha1.InfrahubSyncSpec{
			Source: v1alpha1.InfrahubSource{
				InfrahubAPIURL: s.URL(), ArtefactName: "device-config",
				CredentialsSecretRef: &v1alpha1.LocalSecretReference{Name: "infrahub"},
			},
			Interval: &metav1.Duration{Duration: o.infrahubInterval},
		},
	}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if err := waitConfigMaps(ctx, c, ns, o.infrahubN, 5*time.Minute); err != nil {
		return nil, err
	}
	res.ConvergeSeconds = round(time.Since(start).Seconds(), 2)
	logf("converge: %d ConfigMaps in %.2f s", o.infrahubN, res.ConvergeSeconds)
	if err := waitResourcesReady(ctx, c, ns, o.infrahubN, 2*time.Minute); err != nil {
		return nil, err
	}

	logf("change latency: %d samples", o.infrahubSamples)
	var change, fromPoll []float64
	for k := range o.infrahubSamples {
		i := k * 7 % o.infrahubN
		value := fmt.Sprintf("v%d", k+1)
		// A random phase of the poll: the latency spreads over one interval.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(rand.N(o.infrahubInterval)):
		}
		d, p, err := timeChange(ctx, c, s, rec, ns, i, value, 3*o.infrahubInterval+30*time.Second)
		if err != nil {
			return nil, err
		}
		change, fromPoll = append(change, ms(d)), append(fromPoll, ms(p))
	}
	res.Change, res.FromPoll = stats(change), stats(fromPoll)
	logf("change latency: p50 %.0f ms, p99 %.0f ms; from poll p50 %.0f ms, p99 %.0f ms", res.Change.P50, res.Change.P99, res.FromPoll.P50, res.FromPoll.P99)

	if err := settle(ctx, c, 3*time.Second, time.Minute); err != nil {
		return nil, err
	}
	logf("idle: counting for %s", o.infrahubIdle)
	s.ResetCounts()
	from := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(o.infrahubIdle):
	}
	counts := s.Counts()
	to := time.Now()
	window := to.Sub(from).Seconds()
	res.Idle = idleInfrahub{WindowSeconds: round(window, 1), Counts: counts, Polls: counts.Query + counts.GraphQL}
	res.Idle.PerHour = round(float64(counts.Total())/window*3600, 0)
	if res.Idle.Polls > 0 {
		res.Idle.PerHourAt1m = round(float64(counts.Total())/float64(res.Idle.Polls)*float64(time.Hour/defaultSyncInterval), 0)
	}
	time.Sleep(time.Second) // the audit log is written after the answer
	if res.Idle.KubeRequests, err = (auditLog{c.auditLog}).requests(operatorUser, 0, from, to); err != nil {
		return nil, err
	}
	logf("idle: %d requests to Infrahub (%d polls) in %.0f s; %d Kubernetes requests (%d writes)", counts.Total(), res.Idle.Polls, window, res.Idle.KubeRequests.Total, res.Idle.KubeRequests.Writes)

	if err := settle(ctx, c, 3*time.Second, time.Minute); err != nil {
		return nil, err
	}
	if res.MemoryAfter, err = memoryAfterGC(ctx, c, pprofAddr, o.infrahubN); err != nil {
		return nil, err
	}
	logf("memory after: RSS %.1f MiB, heap %.1f MiB", res.MemoryAfter.RSSMiB, res.MemoryAfter.HeapAllocMiB)

	res.Meta.LoadAverage = []string{loadAverage()}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.out, "infrahub-latest.json"), append(data, '\n'), 0o644); err != nil {
		return nil, err
	}
	return res, nil
}

// timeChange gives artifact i the value and returns the time to the
// ConfigMap's watch event with it, and from the poll that saw it.
func timeChange(ctx context.Context, c *cluster, s *standin.Server, rec *pollRecorder, ns string, i int, value string, timeout time.Duration) (total, fromPoll time.Duration, err error) {
	name := artifactID(i)
	cm, err := c.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w, err := c.kube.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: cm.ResourceVersion,
	})
	if err != nil {
		return 0, 0, err
	}
	defer w.Stop()
	start := time.Now()
	s.SetArtifact("", standin.Artifact{ID: name, Name: "device-config", Definition: "device-configs", Content: configMapContent(i, value)})
	for {
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("ConfigMap %s/%s did not get value %s: %w", ns, name, value, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return 0, 0, fmt.Errorf("watch of ConfigMap %s/%s closed", ns, name)
			}
			got, isCM := ev.Object.(*corev1.ConfigMap)
			if ev.Type != watch.Modified || !isCM || got.Data["value"] != value {
				continue
			}
			now := time.Now()
			poll, ok := rec.lastBefore(now)
			if !ok || poll.Before(start.Add(-time.Second)) {
				return 0, 0, fmt.Errorf("no poll seen before the change of %s", name)
			}
			return now.Sub(start), now.Sub(poll), nil
		}
	}
}

// waitConfigMaps waits until the n artifacts' ConfigMaps exist.
func waitConfigMaps(ctx context.Context, c *cluster, ns string, n int, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		found := 0
		for _, cm := range list.Items {
			if strings.HasPrefix(cm.Name, "art-") {
				found++
			}
		}
		return found == n, nil
	})
}

// waitResourcesReady waits until the sync's n VidraResources are Ready.
func waitResourcesReady(ctx context.Context, c *cluster, ns string, n int, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := c.vidra.InfrahubV1alpha1().VidraResources(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := slices.IndexFunc(list.Items, func(vr v1alpha1.VidraResource) bool {
			return !meta.IsStatusConditionTrue(vr.Status.Conditions, v1alpha1.ConditionReady)
		}) < 0
		return ready && len(list.Items) == n, nil
	})
}

// memoryAfterGC forces a collection in the operator, then measures it.
func memoryAfterGC(ctx context.Context, c *cluster, pprofAddr string, managed int) (*memoryResult, error) {
	if err := fetch(ctx, "http://"+pprofAddr+"/debug/pprof/heap?gc=1", os.DevNull); err != nil {
		return nil, err
	}
	return measureMemory(ctx, c, managed)
}

// freeAddr is a loopback address with a free port.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// infrahubMarkdown is the section's table, for bench/README.md.
func infrahubMarkdown(r *infrahubResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "InfrahubSync, %d artifacts (one ConfigMap each), spec.interval %s, %d changes; %s, %d CPUs\n\n", r.Artifacts, r.Interval, r.Samples, r.Meta.Commit, r.Meta.CPUs)
	b.WriteString("| measure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| converge (sync created → %d ConfigMaps) | %.2f s |\n", r.Artifacts, r.ConvergeSeconds)
	fmt.Fprintf(&b, "| changed artifact → object changed, p50 / p99 / max | %.0f / %.0f / %.0f ms |\n", r.Change.P50, r.Change.P99, r.Change.Max)
	fmt.Fprintf(&b, "| poll that saw it → object changed, p50 / p99 / max | %.0f / %.0f / %.0f ms (latency = up to one interval + this) |\n", r.FromPoll.P50, r.FromPoll.P99, r.FromPoll.Max)
	c := r.Idle.Counts
	fmt.Fprintf(&b, "| idle, %.0f s: requests to Infrahub | %d (query %d, graphql %d, download %d, login %d, refresh %d) over %d polls |\n", r.Idle.WindowSeconds, c.Total(), c.Query, c.GraphQL, c.Download, c.Login, c.Refresh, r.Idle.Polls)
	fmt.Fprintf(&b, "| idle requests to Infrahub per hour | %.0f at %s, %.0f at the default 1m |\n", r.Idle.PerHour, r.Interval, r.Idle.PerHourAt1m)
	fmt.Fprintf(&b, "| idle Kubernetes requests of the operator | %d (%d writes) |\n", r.Idle.KubeRequests.Total, r.Idle.KubeRequests.Writes)
	mb, ma := r.MemoryBefore, r.MemoryAfter
	fmt.Fprintf(&b, "| RSS before → after | %.1f → %.1f MiB (+%.1f) |\n", mb.RSSMiB, ma.RSSMiB, ma.RSSMiB-mb.RSSMiB)
	fmt.Fprintf(&b, "| live heap before → after | %.1f → %.1f MiB (+%.1f) |\n", mb.HeapAllocMiB, ma.HeapAllocMiB, ma.HeapAllocMiB-mb.HeapAllocMiB)
	return b.String()
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vidra-operator/vidra/internal/infrahub/standin"
	"github.com/vidra-operator/vidra/internal/infrahub/webhook"
	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// webhookResult is what the webhook section measured.
type webhookResult struct {
	Meta      runMeta `json:"meta"`
	Artifacts int     `json:"artifacts"`
	// Change is the time from SetArtifact at the stand-in (which posts the
	// webhook at once) to the ConfigMap's watch event with the new value.
	Change  latencyStat `json:"changeToObjectMs"`
	Samples int         `json:"samples"`
	// ChangeCost is what the changes cost Infrahub, in all.
	ChangeCost standin.Counts `json:"changeCost"`
	Flood      floodResult    `json:"flood"`
	Idle       idleWebhook    `json:"idle"`
}

// floodResult is a flood of forged requests while artifacts keep changing.
type floodResult struct {
	Seconds float64 `json:"seconds"`
	Sent    int64   `json:"sent"`
	// Refused are the requests answered 401 (bad_signature).
	Refused int64 `json:"refused"`
	// RatePerSecond is what the flood achieved.
	RatePerSecond float64 `json:"ratePerSecond"`
	// Change is the change latency measured during the flood.
	Change latencyStat `json:"changeToObjectMs"`
	// InfrahubRequests are those the stand-in got during the flood: the
	// changes' downloads alone.
	InfrahubRequests standin.Counts `json:"infrahubRequests"`
	RSSBeforeMiB     float64        `json:"rssBeforeMiB"`
	RSSAfterMiB      float64        `json:"rssAfterMiB"`
	Verdicts         map[string]int `json:"verdicts"`
	// CPUSeconds are the CPU seconds of the operator ("vidra") and of the
	// control plane's processes during the flood.
	CPUSeconds map[string]float64 `json:"cpuSeconds"`
}

// idleWebhook is what an idle sync with a webhook asked of Infrahub.
type idleWebhook struct {
	WindowSeconds float64        `json:"windowSeconds"`
	Counts        standin.Counts `json:"requests"`
	// PerHour is one query per interval (10m with a webhook), PollingPerHour
	// one per the default interval without (1m).
	PerHour        float64 `json:"requestsPerHourWithWebhook"`
	PollingPerHour float64 `json:"requestsPerHourPollingOnly"`
}

const webhookBenchKey = "bench-shared-key"

// runWebhook measures InfrahubSync webhooks on a control plane of its own:
// change latency through a webhook, a flood of forged requests, and idle
// requests to Infrahub.
func runWebhook(ctx context.Context, o options) (res *webhookResult, err error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(o.out) {
		o.out = filepath.Join(root, o.out)
	}
	dir, err := os.MkdirTemp("", "vidra-bench-webhook-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if o.keep || err != nil {
			logf("work directory kept: %s (vidra.log)", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()
	n := o.infrahubN
	res = &webhookResult{Meta: machine(root, o), Artifacts: n, Samples: o.infrahubSamples}
	res.Meta.Notes = []string{
		"Webhooks: the stand-in Infrahub runs in the benchmark's process and posts each artifact change, signed (compact, Infrahub ≥ 1.7.5), to the operator's receiver over TLS on the loopback; the operator runs as its own process. One sync with spec.webhook and no interval (10m by default), artefactName of N artifacts, each one ConfigMap.",
		"Change latency: one artifact at a time gets new content (SetArtifact, which posts the webhook) 600 ms after the previous change was applied (the per-sync limit is two webhook passes a second); the clock stops at the ConfigMap's watch event carrying the new value.",
		"Flood: forged requests (a wrong key, a fresh timestamp and webhook-id each, the sync's own path) from 64 keep-alive connections, paced at the rate asked, while the changes above go on.",
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

	hookAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	hookURL := "https://" + hookAddr + webhook.PathPrefix + ns + "/bench"
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the receiver's certificate is self-signed
		MaxIdleConnsPerHost: 64,
	}}
	s := standin.New(standin.Options{})
	s.AddUser("vidra", "s3cret")
	for i := range n {
		s.SetArtifact("", standin.Artifact{ID: artifactID(i), Name: "device-config", Definition: "device-configs", Content: configMapContent(i, "v0")})
	}
	s.AddWebhook(standin.Webhook{URL: hookURL, SharedKey: webhookBenchKey, Client: client, RetryDelay: time.Second})
	s.Start()
	defer s.Close()

	args := append(splitArgs(o.operatorArgs), "--allow-http-destinations", "--webhook-bind-address="+hookAddr)
	res.Meta.OperatorCmd = "vidra --kubeconfig=<user " + operatorUser + "> --namespace=" + operatorNamespace + " " + strings.Join(append(benchFlags(), args...), " ")
	logf("starting the operator: %s", res.Meta.OperatorCmd)
	if err := c.startOperator(ctx, binary, args, splitArgs(o.operatorEnv)); err != nil {
		return nil, err
	}
	for name, data := range map[string]map[string]string{
		"infrahub":         {"username": "vidra", "password": "s3cret"},
		"infrahub-webhook": {v1alpha1.WebhookSharedKey: webhookBenchKey},
	} {
		if _, err := c.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: data}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	if _, err := c.vidra.InfrahubV1alpha1().InfrahubSyncs(ns).Create(ctx, &v1alpha1.InfrahubSync{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: ns},
		Spec: v1alpha1.InfrahubSyncSpec{
			Source: v1alpha1.InfrahubSource{
				InfrahubAPIURL: s.URL(), ArtefactName: "device-config",
				CredentialsSecretRef: &v1alpha1.LocalSecretReference{Name: "infrahub"},
			},
			Webhook: &v1alpha1.WebhookSpec{SecretRef: v1alpha1.LocalSecretReference{Name: "infrahub-webhook"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if err := waitConfigMaps(ctx, c, ns, n, 5*time.Minute); err != nil {
		return nil, err
	}
	if err := waitResourcesReady(ctx, c, ns, n, 2*time.Minute); err != nil {
		return nil, err
	}
	// The receiver learns the sync's key at the end of its first pass.
	time.Sleep(time.Second)

	version := 0
	changes := func(count int) ([]float64, error) {
		var out []float64
		for range count {
			version++
			i := version * 7 % n
			d, err := timeWebhookChange(ctx, c, s, ns, i, fmt.Sprintf("v%d", version), 30*time.Second)
			if err != nil {
				return nil, err
			}
			out = append(out, ms(d))
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(600 * time.Millisecond):
			}
		}
		return out, nil
	}
	logf("change latency: %d samples", o.infrahubSamples)
	s.ResetCounts()
	lat, err := changes(o.infrahubSamples)
	if err != nil {
		return nil, err
	}
	res.Change, res.ChangeCost = stats(lat), s.Counts()
	logf("change latency: p50 %.0f ms, p99 %.0f ms; Infrahub got %+v", res.Change.P50, res.Change.P99, res.ChangeCost)

	logf("flood: %d forged requests a second for %s, changes going on", o.webhookFloodRate, o.webhookFlood)
	rss0, _, _ := c.op.RSSBytes()
	cpu0 := c.cpu()
	s.ResetCounts()
	floodCtx, stopFlood := context.WithTimeout(ctx, o.webhookFlood)
	var sent, refused atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	flood(floodCtx, &wg, client, hookURL, o.webhookFloodRate, &sent, &refused)
	var floodLat []float64
	for floodCtx.Err() == nil {
		l, err := changes(1)
		if err != nil {
			stopFlood()
			wg.Wait()
			return nil, err
		}
		floodLat = append(floodLat, l...)
	}
	wg.Wait()
	stopFlood()
	secs := time.Since(start).Seconds()
	cpu := c.cpu().since(cpu0)
	rss1, _, _ := c.op.RSSBytes()
	res.Flood = floodResult{Seconds: round(secs, 1), Sent: sent.Load(), Refused: refused.Load(), RatePerSecond: round(float64(sent.Load())/secs, 0),
		Change: stats(floodLat), InfrahubRequests: s.Counts(), RSSBeforeMiB: round(float64(rss0)/(1<<20), 1), RSSAfterMiB: round(float64(rss1)/(1<<20), 1), Verdicts: map[string]int{}, CPUSeconds: cpu}
	if m, err := c.op.Metrics(ctx); err == nil {
		for _, smp := range m["vidra_infrahubsync_webhooks_total"] {
			res.Flood.Verdicts[smp.Labels["verdict"]] = int(smp.Value)
		}
	}
	logf("flood: %d sent (%.0f/s), %d refused; %d changes during it, p50 %.0f ms, p99 %.0f ms; RSS %.1f → %.1f MiB", res.Flood.Sent, res.Flood.RatePerSecond, res.Flood.Refused, len(floodLat), res.Flood.Change.P50, res.Flood.Change.P99, res.Flood.RSSBeforeMiB, res.Flood.RSSAfterMiB)

	logf("idle: counting for %s", o.infrahubIdle)
	time.Sleep(2 * time.Second)
	s.ResetCounts()
	from := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(o.infrahubIdle):
	}
	res.Idle = idleWebhook{WindowSeconds: round(time.Since(from).Seconds(), 1), Counts: s.Counts(),
		PerHour:        float64(time.Hour / v1alpha1.DefaultWebhookInterval),
		PollingPerHour: float64(time.Hour / defaultSyncInterval)}
	logf("idle: %+v in %.0f s", res.Idle.Counts, res.Idle.WindowSeconds)

	res.Meta.LoadAverage = []string{loadAverage()}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	return res, os.WriteFile(filepath.Join(o.out, "webhook-latest.json"), append(data, '\n'), 0o644)
}

// flood sends forged requests at rate a second until ctx ends, from 64
// workers (64); wg waits for them.
func flood(ctx context.Context, wg *sync.WaitGroup, client *http.Client, url string, rate int, sent, refused *atomic.Int64) {
	const workers = 64
	ticks := make(chan int64, rate)
	wg.Go(func() {
		defer close(ticks)
		every := time.Second / time.Duration(max(rate, 1))
		t := time.NewTicker(every)
		defer t.Stop()
		var k int64
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				k++
				select {
				case ticks <- k:
				default: // the workers are behind: the rate achieved says so
				}
			}
		}
	})
	body := `{"data":{"node_id":"art-000","checksum":"0123456789abcdef0123456789abcdef","storage_id":"s"},"branch":"main","event":"infrahub.artifact.updated"}`
	for range workers {
		wg.Go(func() {
			for k := range ticks {
				req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, url, strings.NewReader(body))
				if err != nil {
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(webhook.HeaderID, fmt.Sprintf("msg_flood_%d", k))
				req.Header.Set(webhook.HeaderTimestamp, fmt.Sprint(time.Now().Unix()))
				req.Header.Set(webhook.HeaderSignature, "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
				resp, err := client.Do(req)
				sent.Add(1)
				if err != nil {
					continue
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusUnauthorized {
					refused.Add(1)
				}
			}
		})
	}
}

// timeWebhookChange gives artifact i the value (the stand-in posts the
// webhook) and returns the time to the ConfigMap's watch event with it.
func timeWebhookChange(ctx context.Context, c *cluster, s *standin.Server, ns string, i int, value string, timeout time.Duration) (time.Duration, error) {
	d, _, err := timeChange(ctx, c, s, &pollRecorder{polls: []time.Time{time.Now()}}, ns, i, value, timeout)
	return d, err
}

// webhookMarkdown is the section's table, for bench/README.md.
func webhookMarkdown(r *webhookResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "InfrahubSync webhooks, %d artifacts (one ConfigMap each), %d changes; %s, %d CPUs\n\n", r.Artifacts, r.Samples, r.Meta.Commit, r.Meta.CPUs)
	b.WriteString("| measure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| changed artifact → webhook → object changed, p50 / p99 / max | %.0f / %.0f / %.0f ms |\n", r.Change.P50, r.Change.P99, r.Change.Max)
	fmt.Fprintf(&b, "| the same by the poll alone | up to one interval (1m by default; 10m with a webhook) + the pass |\n")
	c := r.ChangeCost
	fmt.Fprintf(&b, "| Infrahub requests for %d changes | %d (download %d, query %d, login %d) |\n", r.Samples, c.Total(), c.Download, c.Query+c.GraphQL, c.Login)
	f := r.Flood
	fmt.Fprintf(&b, "| flood: forged requests | %d in %.0f s (%.0f/s), %d refused 401 |\n", f.Sent, f.Seconds, f.RatePerSecond, f.Refused)
	fmt.Fprintf(&b, "| changes during the flood, p50 / p99 / max | %.0f / %.0f / %.0f ms |\n", f.Change.P50, f.Change.P99, f.Change.Max)
	fmt.Fprintf(&b, "| Infrahub requests during the flood | %d (the changes' downloads: %d) |\n", f.InfrahubRequests.Total(), f.InfrahubRequests.Download)
	fmt.Fprintf(&b, "| operator RSS before → after the flood | %.1f → %.1f MiB |\n", f.RSSBeforeMiB, f.RSSAfterMiB)
	fmt.Fprintf(&b, "| operator CPU during the flood | %.2f s in %.0f s (%.2f ms a request) |\n", f.CPUSeconds["vidra"], f.Seconds, f.CPUSeconds["vidra"]*1000/float64(max(f.Sent, 1)))
	fmt.Fprintf(&b, "| idle, %.0f s: requests to Infrahub | %d |\n", r.Idle.WindowSeconds, r.Idle.Counts.Total())
	fmt.Fprintf(&b, "| idle requests to Infrahub per hour and sync | %.0f with a webhook (one query per 10m) vs %.0f polling only (one per 1m) |\n", r.Idle.PerHour, r.Idle.PollingPerHour)
	return b.String()
}

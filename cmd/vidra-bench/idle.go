// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vidra-operator/vidra/internal/testenv"
)

// settle waits until the operator's reconcile counter has not moved for
// quiet, so that a measurement starts with no work left over; it gives up
// after limit and says so.
func settle(ctx context.Context, c *cluster, quiet, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last, since := -1.0, time.Now()
	for {
		m, err := c.op.Metrics(ctx)
		if err != nil {
			return err
		}
		v := m.Sum("vidra_reconciles_total", nil)
		if v != last {
			last, since = v, time.Now()
		}
		if time.Since(since) >= quiet {
			return nil
		}
		if time.Now().After(deadline) {
			logf("  reconciles still moving after %s (total %v); measuring anyway", limit, v)
			return nil
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// idleResult is the operator's cost with nothing to do.
type idleResult struct {
	WindowSeconds       float64            `json:"windowSeconds"`
	Requests            requestCount       `json:"operatorRequests"`
	RequestsPerMinute   map[string]float64 `json:"requestsPerMinuteByVerb"`
	WritesPerMinute     float64            `json:"writesPerMinute"`
	ReconcilesPerMin    float64            `json:"reconcilesPerMinute"`
	ReconcilesByTrigger map[string]float64 `json:"reconcilesByTrigger"`
	CPUSeconds          map[string]float64 `json:"cpuSeconds"`
}

// measureIdle counts, over window, the operator's requests in the audit log
// and its reconciles on /metrics.
func measureIdle(ctx context.Context, c *cluster, window time.Duration) (*idleResult, error) {
	if err := settle(ctx, c, 5*time.Second, 2*time.Minute); err != nil {
		return nil, err
	}
	audit := auditLog{c.auditLog}
	m0, err := c.op.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	mark := audit.mark()
	cpu0 := c.cpu()
	start := time.Now()
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	end := time.Now()
	m1, err := c.op.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	cpu := c.cpu().since(cpu0)
	time.Sleep(time.Second)
	reqs, err := audit.requests(operatorUser, mark, start, end)
	if err != nil {
		return nil, err
	}
	win := end.Sub(start)
	perMin := func(v float64) float64 { return round(v*float64(time.Minute)/float64(win), 1) }
	byTrigger := map[string]float64{}
	for _, s := range m1["vidra_reconciles_total"] {
		byTrigger[s.Labels["trigger"]] += s.Value - m0.Sum("vidra_reconciles_total", s.Labels)
	}
	return &idleResult{
		WindowSeconds:       round(win.Seconds(), 1),
		Requests:            reqs,
		RequestsPerMinute:   reqs.perMinute(win),
		WritesPerMinute:     perMin(float64(reqs.Writes)),
		ReconcilesPerMin:    perMin(m1.Sum("vidra_reconciles_total", nil) - m0.Sum("vidra_reconciles_total", nil)),
		ReconcilesByTrigger: byTrigger,
		CPUSeconds:          cpu,
	}, nil
}

// churnResult is the cost of status-only updates of managed objects.
type churnResult struct {
	Updates    int          `json:"statusUpdates"`
	Reconciles float64      `json:"reconciles"`
	Requests   requestCount `json:"operatorRequests"`
	// EventsReceived and FilteredStatusOnly are the watch registry's
	// counters: the updates reached the operator and were dropped there.
	EventsReceived     float64 `json:"watchEventsReceived"`
	FilteredStatusOnly float64 `json:"watchEventsFilteredStatusOnly"`
	SettleSeconds      float64 `json:"settleSeconds"`
}

// deploymentFieldManager is the field manager of the benchmark's status
// writes of Deployments: the control plane runs no deployment controller, so
// the benchmark plays its part.
const deploymentFieldManager = "bench-deployment-controller"

// measureChurn writes the status of managed Deployments through the status
// subresource, as the deployment controller would while a rollout makes no
// progress, updates times over the resources of prefix, then waits settleFor
// and counts what the operator did from the first update on. Each update
// refreshes the Progressing condition's lastUpdateTime and nothing else
// kstatus reads: the Deployments, scaled to zero and with no controller,
// stay InProgress ("ReplicaSet not Available") as they were without a
// status, so no update changes their health. An update that did (an
// observedGeneration other than the generation, say) would rightly wake
// the resource.
func measureChurn(ctx context.Context, c *cluster, prefix string, n, updates int, settleFor time.Duration) (*churnResult, error) {
	gens := make([]int64, min(n, updates))
	for i := range gens {
		d, err := c.kube.AppsV1().Deployments(nsName(prefix, i)).Get(ctx, objName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get Deployment %s/%s: %w", nsName(prefix, i), objName, err)
		}
		gens[i] = d.Generation
	}
	if err := settle(ctx, c, 3*time.Second, time.Minute); err != nil {
		return nil, err
	}
	audit := auditLog{c.auditLog}
	m0, err := c.op.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	mark := audit.mark()
	start := time.Now()
	// Synthetic times, a second apart, so that two updates of one
	// Deployment within a second still differ (metav1.Time has whole
	// seconds).
	base := start.UTC().Truncate(time.Second)
	for j := range updates {
		i := j % n
		ns := nsName(prefix, i)
		patch, err := json.Marshal(map[string]any{"status": map[string]any{
			"observedGeneration": gens[i],
			"conditions": []map[string]any{{
				"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated",
				"message":            fmt.Sprintf("ReplicaSet %q is progressing.", objName+"-5d4f8c7b9"),
				"lastUpdateTime":     base.Add(time.Duration(j+1) * time.Second).Format(time.RFC3339),
				"lastTransitionTime": base.Format(time.RFC3339),
			}},
		}})
		if err != nil {
			return nil, err
		}
		if _, err := c.kube.AppsV1().Deployments(ns).Patch(ctx, objName, types.MergePatchType, patch,
			metav1.PatchOptions{FieldManager: deploymentFieldManager}, "status"); err != nil {
			return nil, fmt.Errorf("status update of Deployment %s/%s: %w", ns, objName, err)
		}
	}
	select {
	case <-time.After(settleFor):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	end := time.Now()
	m1, err := c.op.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	time.Sleep(time.Second)
	reqs, err := audit.requests(operatorUser, mark, start, end)
	if err != nil {
		return nil, err
	}
	delta := func(name string, labels map[string]string) float64 {
		return m1.Sum(name, labels) - m0.Sum(name, labels)
	}
	return &churnResult{
		Updates:            updates,
		Reconciles:         delta("vidra_reconciles_total", nil),
		Requests:           reqs,
		EventsReceived:     delta("vidra_watchregistry_events_received_total", nil),
		FilteredStatusOnly: delta("vidra_watchregistry_events_filtered_total", map[string]string{"reason": "status-only"}),
		SettleSeconds:      settleFor.Seconds(),
	}, nil
}

// memoryResult is the operator's footprint.
type memoryResult struct {
	RSSMiB     float64 `json:"rssMiB"`
	PeakRSSMiB float64 `json:"peakRssMiB"`
	// RSSAnonMiB is the anonymous part of RSS (heap, stacks, runtime),
	// RSSFileMiB the file-backed part (the binary's pages).
	RSSAnonMiB     float64            `json:"rssAnonMiB"`
	RSSFileMiB     float64            `json:"rssFileMiB"`
	HeapAllocMiB   float64            `json:"goHeapAllocMiB"`
	HeapInuseMiB   float64            `json:"goHeapInuseMiB"`
	GoSysMiB       float64            `json:"goSysMiB"`
	Goroutines     float64            `json:"goroutines"`
	Informers      float64            `json:"informers"`
	InformersBy    map[string]float64 `json:"informersByState"`
	CachedObjects  float64            `json:"cachedObjects"`
	ManagedObjects int                `json:"managedObjects"`
}

func measureMemory(ctx context.Context, c *cluster, managed int) (*memoryResult, error) {
	m, err := c.op.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	rss, peak, err := c.op.RSSBytes()
	if err != nil {
		return nil, err
	}
	mem := memoryFrom(m, rss, peak, managed)
	mem.RSSAnonMiB, mem.RSSFileMiB = rssParts(c.op.PID())
	return mem, nil
}

// rssParts reads RssAnon and RssFile of pid from /proc, in MiB.
func rssParts(pid int) (anon, file float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "RssAnon:":
			anon = round(kb/1024, 1)
		case "RssFile:":
			file = round(kb/1024, 1)
		}
	}
	return anon, file
}

func memoryFrom(m testenv.Metrics, rss, peak int64, managed int) *memoryResult {
	mib := func(v float64) float64 { return round(v/(1<<20), 1) }
	by := map[string]float64{}
	for _, s := range m["vidra_watchregistry_informers"] {
		by[s.Labels["state"]] = s.Value
	}
	return &memoryResult{
		RSSMiB:         mib(float64(rss)),
		PeakRSSMiB:     mib(float64(peak)),
		HeapAllocMiB:   mib(m.Sum("go_memstats_heap_alloc_bytes", nil)),
		HeapInuseMiB:   mib(m.Sum("go_memstats_heap_inuse_bytes", nil)),
		GoSysMiB:       mib(m.Sum("go_memstats_sys_bytes", nil)),
		Goroutines:     m.Sum("go_goroutines", nil),
		Informers:      m.Sum("vidra_watchregistry_informers", nil),
		InformersBy:    by,
		CachedObjects:  m.Sum("vidra_watchregistry_cached_objects", nil),
		ManagedObjects: managed,
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// reportPrefix names the namespaces of the driftPolicy Report resources.
const reportPrefix = "report"

// measureReport times driftPolicy Report: samples resources of the usual
// four objects, each with the policy, get one kubectl-edit of their
// ConfigMap's data; the latency is the arrival of the VidraResource's watch
// event that lists the ConfigMap in status.drift, minus the moment just
// before the edit. One resource per sample: a second edit of the same field
// by the same manager changes no record, so no status write would show it.
func measureReport(ctx context.Context, c *cluster, samples int, pause time.Duration) (*driftResult, error) {
	if err := createNamespaces(ctx, c.kube, reportPrefix, samples, 8); err != nil {
		return nil, err
	}
	err := parallelDo(ctx, samples, 8, func(ctx context.Context, i int) error {
		vr := newResource(nsName(reportPrefix, i), i, true, nil)
		vr.Spec.DriftPolicy = v1alpha1.DriftPolicyReport
		if _, err := c.vidra.InfrahubV1alpha1().VidraResources(vr.Namespace).Create(ctx, vr, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create VidraResource %s/%s: %w", vr.Namespace, vr.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, c, reportPrefix, samples, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("driftPolicy Report resources: %w", err)
	}
	audit := auditLog{c.auditLog}
	res := &driftResult{}
	mark, from := audit.mark(), time.Now()
	for i := range samples {
		ns := nsName(reportPrefix, i)
		vrs := c.vidra.InfrahubV1alpha1().VidraResources(ns)
		vr, err := vrs.Get(ctx, objName, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		w, err := vrs.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + objName, ResourceVersion: vr.ResourceVersion})
		if err != nil {
			return nil, err
		}
		start := time.Now()
		patch := fmt.Appendf(nil, `{"data":{%q:"edited-%d"}}`, configKey, i)
		if _, err := c.kube.CoreV1().ConfigMaps(ns).Patch(ctx, configName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
			w.Stop()
			return nil, fmt.Errorf("edit ConfigMap %s/%s: %w", ns, configName, err)
		}
		at, ok := awaitListed(ctx, w, 30*time.Second)
		w.Stop()
		res.Samples++
		if !ok {
			res.Unrepaired++
			logf("  report in %s: not listed within 30s", ns)
			continue
		}
		res.Repaired++
		res.LatenciesMs = append(res.LatenciesMs, ms(at.Sub(start)))
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	time.Sleep(time.Second) // the audit log trails the responses a little
	reqs, err := audit.requests(operatorUser, mark, from, time.Now().Add(-time.Second))
	if err != nil {
		return nil, err
	}
	res.Requests = reqs
	if res.Repaired > 0 {
		res.RequestsPerRepair = round(float64(reqs.Total)/float64(res.Repaired), 2)
	}
	res.Stats = stats(res.LatenciesMs)
	logf("  %-28s n=%d p50=%.1fms p99=%.1fms max=%.1fms unlisted=%d (%s)",
		"configmap-data-edited", res.Repaired, res.Stats.P50, res.Stats.P99, res.Stats.Max, res.Unrepaired, formatCounts(reqs.ByResource))
	return res, nil
}

// awaitListed waits for the event of w that lists the ConfigMap in
// status.drift, and returns when it arrived.
func awaitListed(ctx context.Context, w watch.Interface, timeout time.Duration) (time.Time, bool) {
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return time.Time{}, false
			}
			at := time.Now()
			vr, isVR := ev.Object.(*v1alpha1.VidraResource)
			if !isVR {
				continue
			}
			for _, d := range vr.Status.Drift {
				if d.Kind == "ConfigMap" && d.Name == configName {
					return at, true
				}
			}
		case <-deadline:
			return time.Time{}, false
		case <-ctx.Done():
			return time.Time{}, false
		}
	}
}

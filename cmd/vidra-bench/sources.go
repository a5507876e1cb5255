// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// sourcesResult is what the spec.manifestFrom section measured: how fast a
// change of a referenced ConfigMap reaches the object it declares, beside
// the drift repair of the same objects on the same control plane.
type sourcesResult struct {
	Meta      runMeta `json:"meta"`
	Resources int     `json:"resources"`
	Samples   int     `json:"samples"`
	// Change is the time from the update of a referenced ConfigMap to the
	// watch event of the object with the new value; Drift from the
	// deletion of such an object to the watch event of its re-creation.
	Change latencyStat `json:"sourceChangeToObjectMs"`
	Drift  latencyStat `json:"deletedToRestoredMs"`
}

// sourceContent is the manifest held by source ConfigMap i: one ConfigMap
// out-i with value.
func sourceContent(i int, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: out-%03d\ndata:\n  value: %q\n", i, value)
}

// runSources measures, on a control plane of its own, o.sourcesN resources
// each reading its manifest from a ConfigMap (spec.manifestFrom, interval
// 0: only the source's watch can wake them).
func runSources(ctx context.Context, o options) (res *sourcesResult, err error) {
	if o.sourcesN < 1 || o.sourcesSamples < 1 {
		return nil, fmt.Errorf("-sources-n %d, -sources-samples %d: want at least 1", o.sourcesN, o.sourcesSamples)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(o.out) {
		o.out = filepath.Join(root, o.out)
	}
	dir, err := os.MkdirTemp("", "vidra-bench-sources-")
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
	res = &sourcesResult{Meta: machine(root, o), Resources: o.sourcesN, Samples: o.sourcesSamples}
	res.Meta.N = o.sourcesN
	res.Meta.Notes = []string{
		"spec.manifestFrom: N VidraResources in one namespace, each with an empty spec.manifest and one ConfigMap src-i (key manifest.yaml) declaring ConfigMap out-i; spec.interval 0, so only the watch of src-i wakes a resource.",
		"Change: src-i gets a new value, one sample at a time after a random pause of up to 200 ms; the clock stops at the watch event of out-i carrying it. Drift: out-i is deleted; the clock stops at the watch event of its re-creation.",
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
	if err := createNamespaces(ctx, c.kube, "sources", 1, 1); err != nil {
		return nil, err
	}
	ns := nsName("sources", 0)
	args := splitArgs(o.operatorArgs)
	env := splitArgs(o.operatorEnv)
	res.Meta.OperatorCmd = strings.TrimSpace(strings.Join(env, " ") + " vidra --kubeconfig=<user " + operatorUser + "> --namespace=" + operatorNamespace + " " + strings.Join(append(benchFlags(), args...), " "))
	logf("starting the operator: %s", res.Meta.OperatorCmd)
	if err := c.startOperator(ctx, binary, args, env); err != nil {
		return nil, err
	}

	logf("converge: %d resources reading a ConfigMap each", o.sourcesN)
	for i := range o.sourcesN {
		if _, err := c.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("src-%03d", i)},
			Data:       map[string]string{"manifest.yaml": sourceContent(i, "v0")},
		}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
		if _, err := c.vidra.InfrahubV1alpha1().VidraResources(ns).Create(ctx, &v1alpha1.VidraResource{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%03d", i)},
			Spec: v1alpha1.VidraResourceSpec{
				Interval:     &metav1.Duration{},
				ManifestFrom: []v1alpha1.ManifestSource{{ConfigMapRef: &v1alpha1.SourceKeyReference{Name: fmt.Sprintf("src-%03d", i)}}},
			},
		}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	if err := waitResourcesReady(ctx, c, ns, o.sourcesN, 2*time.Minute); err != nil {
		return nil, err
	}
	if err := settle(ctx, c, 3*time.Second, time.Minute); err != nil {
		return nil, err
	}

	logf("samples: %d source changes, %d deletions", o.sourcesSamples, o.sourcesSamples)
	var change, drift []float64
	for k := range o.sourcesSamples {
		i := k * 7 % o.sourcesN
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(rand.N(200 * time.Millisecond)):
		}
		value := fmt.Sprintf("v%d", k+1)
		d, err := timeObject(ctx, c, ns, fmt.Sprintf("out-%03d", i), func(o *corev1.ConfigMap, t watch.EventType) bool {
			return t == watch.Modified && o.Data["value"] == value
		}, func() error {
			_, err := c.kube.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("src-%03d", i)},
				Data:       map[string]string{"manifest.yaml": sourceContent(i, value)},
			}, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return nil, err
		}
		change = append(change, ms(d))
		d, err = timeObject(ctx, c, ns, fmt.Sprintf("out-%03d", i), func(_ *corev1.ConfigMap, t watch.EventType) bool {
			return t == watch.Added
		}, func() error {
			return c.kube.CoreV1().ConfigMaps(ns).Delete(ctx, fmt.Sprintf("out-%03d", i), metav1.DeleteOptions{})
		})
		if err != nil {
			return nil, err
		}
		drift = append(drift, ms(d))
	}
	res.Change, res.Drift = stats(change), stats(drift)
	logf("source change → object: p50 %.0f ms, p99 %.0f ms; deleted → restored: p50 %.0f ms, p99 %.0f ms", res.Change.P50, res.Change.P99, res.Drift.P50, res.Drift.P99)

	res.Meta.LoadAverage = []string{loadAverage()}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.out, "sources-latest.json"), append(data, '\n'), 0o644); err != nil {
		return nil, err
	}
	return res, nil
}

// timeObject watches ConfigMap ns/name from its current version, runs act,
// and returns the time from act to the first event done accepts.
func timeObject(ctx context.Context, c *cluster, ns, name string, done func(*corev1.ConfigMap, watch.EventType) bool, act func() error) (time.Duration, error) {
	cm, err := c.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	w, err := c.kube.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: cm.ResourceVersion,
	})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	start := time.Now()
	if err := act(); err != nil {
		return 0, err
	}
	for {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("ConfigMap %s/%s: no awaited event: %w", ns, name, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return 0, fmt.Errorf("watch of ConfigMap %s/%s closed", ns, name)
			}
			if got, isCM := ev.Object.(*corev1.ConfigMap); isCM && done(got, ev.Type) {
				return time.Since(start), nil
			}
		}
	}
}

// sourcesMarkdown is the section's table, for bench/README.md.
func sourcesMarkdown(r *sourcesResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "spec.manifestFrom, %d resources of one ConfigMap source each, interval 0, %d samples; %s, %d CPUs\n\n", r.Resources, r.Samples, r.Meta.Commit, r.Meta.CPUs)
	b.WriteString("| measure | p50 / p90 / p99 / max |\n|---|---|\n")
	fmt.Fprintf(&b, "| changed referenced ConfigMap → object changed | %.0f / %.0f / %.0f / %.0f ms |\n", r.Change.P50, r.Change.P90, r.Change.P99, r.Change.Max)
	fmt.Fprintf(&b, "| deleted object → restored (drift repair, same resources) | %.0f / %.0f / %.0f / %.0f ms |\n", r.Drift.P50, r.Drift.P90, r.Drift.P99, r.Drift.Max)
	return b.String()
}

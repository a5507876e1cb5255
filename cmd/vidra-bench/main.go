// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vidra-operator/vidra/internal/testenv"
)

type options struct {
	n               int
	out             string
	skipBaseline    bool
	samples         int
	reportSamples   int
	periodicSamples int
	periodicEvery   time.Duration
	idleWindow      time.Duration
	churnUpdates    int
	healthN         int
	healthSamples   int
	chains          int
	chainDepth      int
	creators        int
	vidra           string
	operatorArgs    string
	operatorEnv     string
	keep            bool
	containerMemory string
	pprof           string
	floor           bool
	apiserverPprof  bool
	// replicas, when set, runs the scale measurement instead (scale.go).
	replicas          []int
	scaleDriftSamples int
	// only, when "infrahub", runs the InfrahubSync section alone (infrahub.go).
	only string
	// sourcesN and sourcesSamples size the sources section (sources.go).
	sourcesN, sourcesSamples int
	infrahubN                int
	infrahubSamples          int
	infrahubInterval         time.Duration
	infrahubIdle             time.Duration
	webhookFlood             time.Duration
	webhookFloodRate         int
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 1000, "VidraResources to converge, 4 objects each")
	flag.StringVar(&o.out, "out", "bench/results", "directory for latest.json and drift-latency.svg")
	flag.BoolVar(&o.skipBaseline, "skip-baseline", false, "skip the kubectl apply --server-side baseline")
	flag.IntVar(&o.samples, "samples", 200, "drift samples per kind in event mode (200: p99 is then the 198th, not the maximum)")
	flag.IntVar(&o.reportSamples, "report-samples", 100, "driftPolicy Report resources, each edited once and timed until status lists the edit")
	flag.IntVar(&o.periodicSamples, "periodic-samples", 6, "drift samples per kind in periodic-only mode")
	flag.DurationVar(&o.periodicEvery, "periodic-interval", 2*time.Second, "spec.interval of the periodic-only resources")
	flag.DurationVar(&o.idleWindow, "idle-window", time.Minute, "how long idle requests are counted")
	flag.IntVar(&o.churnUpdates, "churn", 100, "status-only updates of managed Deployments, in the churn phase and again in the health section")
	flag.IntVar(&o.healthN, "health-n", 100, "VidraResources with a Deployment of one replica for the health section")
	flag.IntVar(&o.healthSamples, "health-samples", 200, "health transitions timed (200: p99 is then the 198th, not the maximum)")
	flag.IntVar(&o.chains, "chains", 10, "spec.dependsOn chains, one namespace each")
	flag.IntVar(&o.chainDepth, "chain-depth", 10, "VidraResources per spec.dependsOn chain, each with one ConfigMap")
	flag.IntVar(&o.creators, "creators", 16, "parallel clients creating VidraResources")
	flag.StringVar(&o.vidra, "vidra", "", "a prebuilt vidra binary; empty builds cmd/vidra into bin/bench/vidra")
	flag.StringVar(&o.operatorArgs, "operator-args", "", "extra flags for the operator, space-separated (the defaults are measured when empty)")
	flag.StringVar(&o.operatorEnv, "operator-env", "", "extra environment for the operator, space-separated, e.g. GOMEMLIMIT=64MiB")
	flag.StringVar(&o.containerMemory, "container-memory", "manifest", "the operator's container memory limit, from which it gets the --memory-limit its auto policy would choose there: manifest (that of manifests/manager/deployment.yaml), none, or a quantity such as 512Mi; -operator-args may override the flag")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (audit log, operator log) after the run")
	flag.StringVar(&o.pprof, "pprof", "", "operator's --pprof-bind-address during the run, for investigation (empty: off)")
	flag.BoolVar(&o.apiserverPprof, "apiserver-pprof", false, "profile kube-apiserver's CPU during the baseline and the converge (the scale run: the handoff), for investigation (files in the work directory)")
	replicas := flag.String("replicas", "", "run the scale measurement instead: once per replica count, comma-separated (1,2,3), each on a fresh control plane, with -n resources")
	flag.BoolVar(&o.floor, "floor", false, "with -replicas: also time the converge by a client that sends only Vidra's requests, on a fresh control plane (what an operator that costs nothing would reach)")
	flag.IntVar(&o.scaleDriftSamples, "scale-drift-samples", 50, "ConfigMap deletions timed in each scale run")
	flag.StringVar(&o.only, "only", "", "run one section alone on a control plane of its own: infrahub, webhook or sources (empty: the whole benchmark)")
	flag.DurationVar(&o.webhookFlood, "webhook-flood", 10*time.Second, "how long the webhook section floods the receiver with forged requests")
	flag.IntVar(&o.webhookFloodRate, "webhook-flood-rate", 1000, "forged requests a second of the webhook section's flood")
	flag.IntVar(&o.sourcesN, "sources-n", 20, "VidraResources of the sources section, each reading one ConfigMap (spec.manifestFrom)")
	flag.IntVar(&o.sourcesSamples, "sources-samples", 100, "source changes, and deletions, timed in the sources section")
	flag.IntVar(&o.infrahubN, "infrahub-n", 100, "artifacts of the InfrahubSync section, one ConfigMap each")
	flag.IntVar(&o.infrahubSamples, "infrahub-samples", 20, "artifact changes timed in the InfrahubSync section")
	flag.DurationVar(&o.infrahubInterval, "infrahub-interval", 2*time.Second, "spec.interval of the InfrahubSync section's sync")
	flag.DurationVar(&o.infrahubIdle, "infrahub-idle", time.Minute, "how long the InfrahubSync section counts idle requests")
	flag.Parse()
	if o.only != "" && o.only != "infrahub" && o.only != "webhook" && o.only != "sources" {
		fmt.Fprintf(os.Stderr, "bench: -only %q: want infrahub, webhook, sources or nothing\n", o.only)
		os.Exit(2)
	}
	for _, f := range strings.Split(*replicas, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		r, err := strconv.Atoi(f)
		if err != nil || r < 1 {
			fmt.Fprintf(os.Stderr, "bench: -replicas %q: want positive numbers\n", *replicas)
			os.Exit(2)
		}
		o.replicas = append(o.replicas, r)
	}

	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	limit, err := memoryLimitFlag(root, o.containerMemory)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	// First, so that a --memory-limit in -operator-args wins.
	o.operatorArgs = strings.TrimSpace(limit + " " + o.operatorArgs)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	if len(o.replicas) > 0 {
		res, err := runScale(ctx, o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Print(scaleMarkdown(res))
		fmt.Fprintf(os.Stderr, "bench: done in %s; results in %s\n", time.Since(started).Round(time.Second), o.out)
		return
	}
	if o.only == "webhook" {
		res, err := runWebhook(ctx, o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Print(webhookMarkdown(res))
		fmt.Fprintf(os.Stderr, "bench: done in %s; results in %s\n", time.Since(started).Round(time.Second), o.out)
		return
	}
	if o.only == "infrahub" {
		res, err := runInfrahub(ctx, o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Print(infrahubMarkdown(res))
		fmt.Fprintf(os.Stderr, "bench: done in %s; results in %s\n", time.Since(started).Round(time.Second), o.out)
		return
	}
	if o.only == "sources" {
		res, err := runSources(ctx, o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Print(sourcesMarkdown(res))
		fmt.Fprintf(os.Stderr, "bench: done in %s; results in %s\n", time.Since(started).Round(time.Second), o.out)
		return
	}
	res, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Print(markdown(res))
	fmt.Fprintf(os.Stderr, "bench: done in %s; results in %s\n", time.Since(started).Round(time.Second), o.out)
}

// logf reports progress on stderr, so that stdout carries only the table.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func splitArgs(s string) []string { return strings.Fields(s) }

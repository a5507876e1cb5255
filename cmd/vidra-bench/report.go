// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// results is everything one run measured; it is written as latest.json.
type results struct {
	Meta     runMeta         `json:"meta"`
	Baseline *baselineResult `json:"baseline,omitempty"`
	Converge *convergeResult `json:"converge"`
	Memory   *memoryResult   `json:"memoryAfterConverge"`
	Idle     *idleResult     `json:"idle"`
	Churn    *churnResult    `json:"churn"`
	Drift    driftResults    `json:"drift"`
	Health   *healthResult   `json:"health,omitempty"`
	// MemoryAtEnd is taken after every phase, drift included.
	MemoryAtEnd *memoryResult `json:"memoryAtEnd"`
	// WatchesByResource counts the watches the operator opened over the
	// whole run, by resource: one informer per resource type shows as one
	// watch (plus re-watches when the API server closes one).
	WatchesByResource map[string]int `json:"operatorWatchesByResource"`
	Targets           []target       `json:"spec7Targets"`
}

type runMeta struct {
	Date        string   `json:"date"`
	Command     string   `json:"command"`
	GoVersion   string   `json:"goVersion"`
	Kubernetes  string   `json:"kubernetes"`
	CPUs        int      `json:"cpus"`
	CPUModel    string   `json:"cpuModel"`
	MemoryGiB   float64  `json:"memoryGiB"`
	Commit      string   `json:"commit"`
	DirtyPaths  []string `json:"uncommittedOperatorFiles,omitempty"`
	N           int      `json:"n"`
	OperatorCmd string   `json:"operatorFlags"`
	// LoadAverage is /proc/loadavg at the start and at the end of the run:
	// the machine is shared, and a busy neighbour shows here.
	LoadAverage []string `json:"loadAverageStartEnd"`
	Notes       []string `json:"notes"`
}

type driftResults struct {
	// PauseMs is the pause between two samples.
	PauseMs  float64                 `json:"pauseBetweenSamplesMs"`
	Event    map[string]*driftResult `json:"eventMode"`
	Periodic map[string]*driftResult `json:"periodicOnlyMode"`
	// PeriodicInterval is spec.interval of the periodic-only resources.
	PeriodicInterval string `json:"periodicInterval"`
	// Report is driftPolicy Report: the time until status.drift lists an
	// edit, by kind.
	Report map[string]*driftResult `json:"reportMode,omitempty"`
}

// target is one SPEC §7 target and whether this run met it.
type target struct {
	Name     string `json:"name"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

func (r *results) checkTargets() {
	add := func(name, want, got string, met bool) {
		r.Targets = append(r.Targets, target{Name: name, Target: want, Measured: got, Met: met})
	}
	var worstP50, worstP99 float64
	unrepaired, kinds := 0, 0
	for _, k := range driftKindNames() {
		d := r.Drift.Event[k]
		if d == nil {
			continue
		}
		kinds++
		worstP50 = math.Max(worstP50, d.Stats.P50)
		worstP99 = math.Max(worstP99, d.Stats.P99)
		unrepaired += d.Unrepaired
	}
	add("drift: every kind repaired (event mode)", "4 of 4 kinds, every sample", fmt.Sprintf("%d kinds, %d samples unrepaired", kinds, unrepaired), kinds == 4 && unrepaired == 0)
	add("drift p50 (worst kind)", "< 10 ms", fmt.Sprintf("%.1f ms", worstP50), worstP50 < 10)
	add("drift p99 (worst kind)", "< 30 ms", fmt.Sprintf("%.1f ms", worstP99), worstP99 < 30)
	if c := r.Converge; c != nil {
		add("converge rate", "≥ 100 objects/s", fmt.Sprintf("%.1f objects/s", c.PerSec), c.PerSec >= 100)
		if r.Baseline != nil {
			add("converge vs kubectl apply --server-side", "faster (ratio > 1)", fmt.Sprintf("%.2f× (%.1f s vs %.1f s)", c.VsBaseline, c.Seconds, r.Baseline.Seconds), c.VsBaseline > 1)
		}
	}
	if i := r.Idle; i != nil {
		nonWatch := i.Requests.Total - i.Requests.ByVerb["watch"]
		add("idle: requests but watches", "0", fmt.Sprintf("%d in %.0f s (%d watch starts)", nonWatch, i.WindowSeconds, i.Requests.ByVerb["watch"]), nonWatch == 0)
		add("idle: writes", "0", fmt.Sprintf("%d", i.Requests.Writes), i.Requests.Writes == 0)
		add("idle: reconciles between intervals", "0", fmt.Sprintf("%.0f/min", i.ReconcilesPerMin), i.ReconcilesPerMin == 0)
	}
	if c := r.Churn; c != nil {
		add("status-only churn: reconciles", "0", fmt.Sprintf("%.0f for %d updates", c.Reconciles, c.Updates), c.Reconciles == 0)
		add("status-only churn: requests", "0", fmt.Sprintf("%d", c.Requests.Total), c.Requests.Total == 0)
	}
	if h := r.Health; h != nil {
		if c := h.Churn; c != nil {
			add("health: status churn keeping health, reconciles", "0", fmt.Sprintf("%.0f for %d updates (barrier seen: %t)", c.Reconciles, c.Updates, c.BarrierSeen), c.BarrierSeen && c.Reconciles == 0 && c.Woken == 0)
			add("health: status churn keeping health, requests", "0", fmt.Sprintf("%d", c.Requests), c.BarrierSeen && c.Requests == 0)
		}
		if t := h.Transition; t != nil {
			add("health transition p99", "< 50 ms", fmt.Sprintf("%.1f ms (p50 %.1f ms, %d of %d seen)", t.Stats.P99, t.Stats.P50, t.Observed, t.Samples), t.Missed == 0 && t.Observed > 0 && t.Stats.P99 < 50)
		}
		if ch := h.Chains; ch != nil {
			add("dependsOn: every resource of the chains Ready", fmt.Sprintf("%d of %d", ch.Resources, ch.Resources), fmt.Sprintf("%d of %d", ch.Resources-ch.NotReady, ch.Resources), ch.NotReady == 0)
		}
	}
	if m := r.Memory; m != nil {
		note := ""
		if m.ManagedObjects < 4000 {
			note = fmt.Sprintf(" (with %d objects, not 4,000)", m.ManagedObjects)
		}
		add("memory: RSS after converge", "< 80 MiB with 4,000 objects", fmt.Sprintf("%.1f MiB%s", m.RSSMiB, note), m.RSSMiB < 80)
		add("informers: one per (cluster, GVR)", "4 (configmaps, serviceaccounts, services, deployments)", fmt.Sprintf("%.0f", m.Informers), m.Informers == 4)
	}
}

func driftKindNames() []string {
	var names []string
	for _, k := range driftKinds() {
		names = append(names, k.name)
	}
	return names
}

func writeJSON(path string, r *results) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// markdown renders the figures as the tables bench/README.md shows.
func markdown(r *results) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := r.Meta
	p("## Vidra benchmark, N=%d, %s\n\n", m.N, m.Date)
	p("`%s` · %d CPUs (%s) · %.0f GiB · %s · Kubernetes %s · commit %s · load average at start / end: %s\n\n", m.Command, m.CPUs, m.CPUModel, m.MemoryGiB, m.GoVersion, m.Kubernetes, m.Commit, strings.Join(m.LoadAverage, " / "))

	p("### SPEC §7 targets\n\n| target | wanted | measured | met |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		met := "yes"
		if !t.Met {
			met = "**no**"
		}
		p("| %s | %s | %s | %s |\n", t.Name, t.Target, t.Measured, met)
	}

	if c := r.Converge; c != nil {
		p("\n### Converge\n\n| | objects | seconds | objects/s |\n|---|---|---|---|\n")
		p("| Vidra, %d VidraResources × 4 objects (creates included: %.1f s) | %d | %.2f | %.1f |\n", c.Resources, c.CreateSeconds, c.Objects, c.Seconds, c.PerSec)
		if bl := r.Baseline; bl != nil {
			p("| `kubectl apply --server-side -f` of one file | %d | %.2f | %.1f |\n", bl.Objects, bl.Seconds, bl.PerSec)
			p("\nVidra / kubectl speed-up: **%.2f×**.", c.VsBaseline)
		}
		p(" Operator requests during converge: %d (%s); reconciles: %s; applies: %.0f. CPU seconds: %s.",
			c.Requests.Total, formatCounts(c.Requests.ByVerb), formatFloats(c.Reconciles), c.Applies, formatFloats(c.CPUSeconds))
		p(" Operator CPU per resource: %.2f ms", c.OperatorCPUPerResourceMs)
		if c.GCShare >= 0 {
			p(", of which the garbage collector took %.0f %%", c.GCShare*100)
		}
		p(".\n")
	}

	p("\n### Drift repair (time from the change request to the repairing watch event)\n\n")
	p("| kind | mode | samples | p50 ms | p90 ms | p99 ms | max ms | unrepaired | p50 change seen / repair after it, ms | operator requests per repair |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, mode := range []struct {
		name string
		res  map[string]*driftResult
	}{{"event", r.Drift.Event}, {"periodic " + r.Drift.PeriodicInterval, r.Drift.Periodic}, {"report: listed in status", r.Drift.Report}} {
		for _, k := range driftKindNames() {
			d := mode.res[k]
			if d == nil {
				continue
			}
			s := d.Stats
			p("| %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %d | %.1f / %.1f | %.2f (%s) |\n", k, mode.name, d.Samples, s.P50, s.P90, s.P99, s.Max, d.Unrepaired,
				d.ChangeSeen.P50, d.AfterChange.P50, d.RequestsPerRepair, formatCounts(d.Requests.ByResource))
		}
	}

	if i := r.Idle; i != nil {
		p("\n### Idle (%.0f s, everything converged)\n\n", i.WindowSeconds)
		p("| requests/min by verb (API server audit log) | writes/min | reconciles/min |\n|---|---|---|\n")
		p("| %s | %.1f | %.1f |\n", formatFloatsOr(i.RequestsPerMinute, "none"), i.WritesPerMinute, i.ReconcilesPerMin)
	}
	if c := r.Churn; c != nil {
		p("\n### Status-only churn\n\n| status updates | reconciles | operator requests | watch events received / filtered as status-only |\n|---|---|---|---|\n")
		p("| %d | %.0f | %s | %.0f / %.0f |\n", c.Updates, c.Reconciles, strings.TrimSpace(fmt.Sprintf("%d %s", c.Requests.Total, parens(formatCounts(c.Requests.ByVerb)))), c.EventsReceived, c.FilteredStatusOnly)
	}
	if h := r.Health; h != nil {
		p("\n### Health (%d resources, each a Deployment of one replica with spec.wait; Ready and Healthy %.1f s after the first create)\n\n", h.Resources, h.SetupSeconds)
		if c := h.Churn; c != nil {
			p("| status updates keeping health | reconciles | operator requests | owners woken | watch events received / filtered as status-only | barrier: parent updated after |\n|---|---|---|---|---|---|\n")
			barrier := "**not seen**"
			if c.BarrierSeen {
				barrier = fmt.Sprintf("%.1f ms", c.BarrierMs)
			}
			p("| %d | %.0f | %d | %.0f | %.0f / %.0f | %s |\n", c.Updates, c.Reconciles, c.Requests, c.Woken, c.EventsReceived, c.FilteredStatusOnly, barrier)
			p("\nThe barrier's own reconcile and status write are subtracted; raw window: reconciles %s; requests %s.\n",
				formatFloatsOr(c.RawReconciles, "none"), strings.TrimSpace(fmt.Sprintf("%d %s", c.RawRequests.Total, parens(formatCounts(c.RawRequests.ByResource)))))
		}
		if t := h.Transition; t != nil {
			p("\n| health transition (Deployment status write answered → parent's status on the watch) | samples | p50 ms | p90 ms | p99 ms | max ms | missed | from the request, p50 / p99 ms | reconciles / requests per transition |\n|---|---|---|---|---|---|---|---|---|\n")
			row := func(name string, s latencyStat, n int, extra string) {
				p("| %s | %d | %.1f | %.1f | %.1f | %.1f | %s |\n", name, n, s.P50, s.P90, s.P99, s.Max, extra)
			}
			row("both directions", t.Stats, t.Observed, fmt.Sprintf("%d | %.1f / %.1f | %.2f / %.2f (%s)", t.Missed, t.FromRequest.P50, t.FromRequest.P99,
				t.ReconcilesPerTransition, t.RequestsPerTransition, formatCounts(t.Requests.ByResource)))
			row("Current → InProgress", t.ToInProgress, t.ToInProgressSamples, " | | ")
			row("InProgress → Current", t.ToCurrent, t.ToCurrentSamples, " | | ")
		}
		if ch := h.Chains; ch != nil {
			p("\n| spec.dependsOn: %d chains of %d, one ConfigMap each | ms |\n|---|---|\n", ch.Chains, ch.Depth)
			p("| first Ready → last Ready (wall clock) | %.1f |\n", ch.WallClockMs)
			p("| first head created → last Ready | %.1f |\n", ch.FromCreateMs)
			p("| sum of the %d links (dependency Ready → dependent Ready) | %.1f |\n", len(ch.LinkLatenciesMs), ch.SumOfLinksMs)
			p("| link p50 / p90 / p99 / max | %.1f / %.1f / %.1f / %.1f |\n", ch.Link.P50, ch.Link.P90, ch.Link.P99, ch.Link.Max)
			p("| one chain, head Ready → tail Ready, p50 / max | %.1f / %.1f |\n", ch.Chain.P50, ch.Chain.Max)
			p("| head: create request → Ready, p50 / max | %.1f / %.1f |\n", ch.Head.P50, ch.Head.Max)
			p("\nNot Ready: %d. Reconciles by trigger: %s. Operator requests: %s.\n", ch.NotReady, formatFloatsOr(ch.ReconcilesByTrigger, "none"),
				strings.TrimSpace(fmt.Sprintf("%d %s", ch.Requests.Total, parens(formatCounts(ch.Requests.ByResource)))))
		}
	}
	if mem := r.Memory; mem != nil {
		p("\n### Memory and informers\n\n| when | managed objects | RSS MiB (anon + file) | peak RSS MiB | Go heap alloc MiB | heap in use MiB | Go runtime total MiB | goroutines | informers | cached objects |\n|---|---|---|---|---|---|---|---|---|---|\n")
		row := func(when string, x *memoryResult) {
			p("| %s | %d | %.1f (%.1f + %.1f) | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f | %.0f |\n", when, x.ManagedObjects, x.RSSMiB, x.RSSAnonMiB, x.RSSFileMiB, x.PeakRSSMiB,
				x.HeapAllocMiB, x.HeapInuseMiB, x.GoSysMiB, x.Goroutines, x.Informers, x.CachedObjects)
		}
		row("after converge", mem)
		if e := r.MemoryAtEnd; e != nil {
			row("end of run", e)
		}
		if len(r.WatchesByResource) > 0 {
			p("\nWatches the operator opened over the whole run, by resource: %s.\n", formatCounts(r.WatchesByResource))
		}
	}
	for _, n := range m.Notes {
		p("\n- %s", n)
	}
	p("\n")
	return b.String()
}

func parens(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

func formatCounts(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func formatFloats(m map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		if m[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s %g", k, m[k]))
		}
	}
	return strings.Join(parts, ", ")
}

func formatFloatsOr(m map[string]float64, none string) string {
	if s := formatFloats(m); s != "" {
		return s
	}
	return none
}

// writeSVG plots the drift repair latencies as cumulative distributions, one
// line per kind and mode, on a logarithmic time axis: where a line rises
// steeply most repairs take that long, and a long tail shows as a slow
// approach to 100 %. Dotted lines mark the p50 and p99 targets.
func writeSVG(path string, r *results) error {
	const (
		w, h                     = 1000, 540
		left, right, top, bottom = 70, 310, 56, 60
	)
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	type series struct {
		label  string
		ms     []float64
		color  string
		dashed bool
	}
	colors := map[string]string{
		"configmap-deleted": "#1f77b4", "configmap-data-edited": "#ff7f0e",
		"deployment-replicas-changed": "#2ca02c", "service-label-added": "#d62728",
	}
	var all []series
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, mode := range []struct {
		name   string
		res    map[string]*driftResult
		dashed bool
	}{{"event", r.Drift.Event, false}, {"periodic " + r.Drift.PeriodicInterval, r.Drift.Periodic, true}} {
		for _, k := range driftKindNames() {
			d := mode.res[k]
			if d == nil || len(d.LatenciesMs) == 0 {
				continue
			}
			s := slices.Clone(d.LatenciesMs)
			slices.Sort(s)
			lo, hi = math.Min(lo, s[0]), math.Max(hi, s[len(s)-1])
			all = append(all, series{label: fmt.Sprintf("%s, %s (p50 %.1f, p99 %.1f ms)", k, mode.name, d.Stats.P50, d.Stats.P99), ms: s, color: colors[k], dashed: mode.dashed})
		}
	}
	if len(all) == 0 {
		return nil
	}
	// Decades that hold every sample and both targets.
	lo, hi = math.Min(lo, 10), math.Max(hi, 30)
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi == dlo {
		dhi++
	}
	x := func(ms float64) float64 { return float64(left) + (math.Log10(ms)-dlo)/(dhi-dlo)*pw }
	y := func(f float64) float64 { return float64(top) + (1-f)*ph }

	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	p(`<text x="%d" y="24" font-size="15" font-weight="bold">Vidra drift repair latency, cumulative distribution (N=%d, %s)</text>`+"\n", left, r.Meta.N, html.EscapeString(r.Meta.Date))
	// Grid and ticks: 1, 2, 5 per decade.
	for d := dlo; d <= dhi; d++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, d)
			if math.Log10(v) > dhi+1e-9 {
				continue
			}
			xx := x(v)
			stroke := "#eee"
			if m == 1 {
				stroke = "#ccc"
			}
			p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", xx, top, xx, h-bottom, stroke)
			p(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", xx, h-bottom+16, msLabel(v))
		}
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 0.9, 1} {
		p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", left, y(f), w-right, y(f))
		p(`<text x="%d" y="%.1f" text-anchor="end">%g%%</text>`+"\n", left-6, y(f)+4, f*100)
	}
	for _, t := range []struct {
		ms    float64
		label string
	}{{10, "p50 < 10 ms"}, {30, "p99 < 30 ms"}} {
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#555" stroke-dasharray="2,3"/>`+"\n", x(t.ms), top, x(t.ms), h-bottom)
		p(`<text x="%.1f" y="%d" font-size="10" fill="#555" text-anchor="middle">%s</text>`+"\n", x(t.ms), top-5, html.EscapeString(t.label))
	}
	p(`<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#333"/>`+"\n", left, top, pw, ph)
	p(`<text x="%.0f" y="%d" text-anchor="middle">time from the change request to the repairing watch event (log scale)</text>`+"\n", float64(left)+pw/2, h-18)
	p(`<text x="18" y="%.0f" text-anchor="middle" transform="rotate(-90 18 %.0f)">share of samples repaired</text>`+"\n", float64(top)+ph/2, float64(top)+ph/2)
	for i, s := range all {
		var path strings.Builder
		fmt.Fprintf(&path, "M%.1f,%.1f", x(s.ms[0]), y(0))
		for j, v := range s.ms {
			fmt.Fprintf(&path, " H%.1f V%.1f", x(v), y(float64(j+1)/float64(len(s.ms))))
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6,4"`
		}
		p(`<path d="%s" fill="none" stroke="%s" stroke-width="1.8"%s/>`+"\n", path.String(), s.color, dash)
		ly := top + 10 + i*34
		p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", w-right+12, ly, w-right+36, ly, s.color, dash)
		label := strings.SplitN(s.label, " (", 2)
		p(`<text x="%d" y="%d" font-size="11">%s</text>`+"\n", w-right+42, ly+4, html.EscapeString(label[0]))
		if len(label) == 2 {
			p(`<text x="%d" y="%d" font-size="10" fill="#555">(%s</text>`+"\n", w-right+42, ly+17, html.EscapeString(label[1]))
		}
	}
	p("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func msLabel(ms float64) string {
	switch {
	case ms >= 1000:
		return fmt.Sprintf("%gs", ms/1000)
	default:
		return fmt.Sprintf("%gms", ms)
	}
}

func writeOutputs(dir string, r *results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "latest.json"), r); err != nil {
		return err
	}
	return writeSVG(filepath.Join(dir, "drift-latency.svg"), r)
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Command dashboard-shot draws the panels of the Grafana dashboard
// (charts/vidra/files/dashboard.json) from recorded scrapes of a live
// operator's /metrics, as an SVG image for the docs: Grafana itself is not
// needed to show a reader what the dashboard shows.
//
//	dashboard-shot record -url http://127.0.0.1:18080/metrics -every 5s -for 5m -out rec.txt
//	dashboard-shot render -in docs/img/dashboard-recording.txt.gz -out docs/img/dashboard.svg
//
// The panels' queries are evaluated the simple way their shapes allow (a
// counter's rate between scrapes, a gauge's sum by the legend's label, a
// histogram's p99 from bucket deltas); it is a picture, not PromQL.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vidra-operator/vidra/internal/testenv"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dashboard-shot record|render [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "record":
		err = record(ctx, os.Args[2:])
	case "render":
		err = render(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (record, render)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboard-shot:", err)
		os.Exit(1)
	}
}

// drawn says whether a line of the exposition is a sample of a metric the
// panels draw: a recording keeps only those.
func drawn(line string) bool {
	name, _, _ := strings.Cut(line, "{")
	name, _, _ = strings.Cut(name, " ")
	for _, p := range panels {
		for _, q := range p.queries {
			if q.metric == name {
				return true
			}
		}
	}
	return false
}

// record scrapes url every interval for a duration, appending each scrape
// to out after a line "# at <unix seconds>".
func record(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("record", flag.ExitOnError)
	url := fs.String("url", "http://127.0.0.1:18080/metrics", "the operator's /metrics")
	every := fs.Duration("every", 5*time.Second, "scrape interval")
	length := fs.Duration("for", 5*time.Minute, "how long to record")
	out := fs.String("out", "recording.txt", "where to write")
	_ = fs.Parse(args)
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	defer w.Flush()
	client := &http.Client{Timeout: 10 * time.Second}
	end := time.Now().Add(*length)
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for time.Now().Before(end) {
		resp, err := client.Get(*url)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "# at %d\n", time.Now().Unix())
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "#") && drawn(line) {
				fmt.Fprintln(w, line)
			}
		}
		_ = resp.Body.Close()
		if err := w.Flush(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	return nil
}

// scrape is one recorded scrape.
type scrape struct {
	at      float64
	metrics testenv.Metrics
}

func readRecording(path string) ([]scrape, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// The docs keep their recording gzipped.
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		if data, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	var out []scrape
	for _, part := range strings.Split(string(data), "# at ")[1:] {
		stamp, body, _ := strings.Cut(part, "\n")
		at, err := strconv.ParseFloat(stamp, 64)
		if err != nil {
			return nil, err
		}
		m, err := testenv.ParseMetrics(strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		out = append(out, scrape{at, m})
	}
	if len(out) < 3 {
		return nil, errors.New("fewer than 3 scrapes recorded")
	}
	return out, nil
}

// query is one line family of a panel: samples of metric matching match,
// summed by the label by, as a gauge, a per-second (or scale) rate, or a
// histogram's p99.
type query struct {
	metric string
	match  func(map[string]string) bool
	by     string
	kind   string // gauge, rate, p99
	scale  float64
	legend string // a fixed legend when by is empty
}

type panel struct {
	title, unit string
	queries     []query
}

// The panels, by the dashboard's titles.
var panels = []panel{
	{"Reconciles by cause", "/s", []query{{metric: "vidra_reconciles_total", by: "trigger", kind: "rate"}}},
	{"Reconciles by result", "/s", []query{{metric: "vidra_reconciles_total", by: "result", kind: "rate"}}},
	{"Drift by kind", "/h", []query{{metric: "vidra_drift_detected_total", by: "kind", kind: "rate", scale: 3600}}},
	{"Drift by manager", "/h", []query{{metric: "vidra_drift_detected_total", by: "manager", kind: "rate", scale: 3600}}},
	{"Time to repair (p99)", "s", []query{
		{metric: "vidra_watchregistry_handler_lag_seconds_bucket", kind: "p99", legend: "event to queue"},
		{metric: "workqueue_queue_duration_seconds_bucket", match: label("name", "vidraresources"), kind: "p99", legend: "wait in queue"},
		{metric: "vidra_reconcile_duration_seconds_bucket", kind: "p99", legend: "reconcile"},
	}},
	{"Resources not Ready", "", []query{{metric: "vidra_resource_conditions", by: "namespace", kind: "gauge",
		match: func(l map[string]string) bool { return l["type"] == "Ready" && l["status"] != "True" }}}},
	{"Queue depth", "", []query{{metric: "workqueue_depth", by: "name", kind: "gauge"}}},
	{"Queue latency (p99)", "s", []query{
		{metric: "workqueue_queue_duration_seconds_bucket", match: label("name", "vidraresources"), kind: "p99", legend: "vidraresources"},
		{metric: "workqueue_queue_duration_seconds_bucket", match: label("name", "infrahubsyncs"), kind: "p99", legend: "infrahubsyncs"},
	}},
	{"Informers by state", "", []query{{metric: "vidra_watchregistry_informers", by: "state", kind: "gauge"}}},
	{"Watch events", "/s", []query{{metric: "vidra_watchregistry_events_received_total", by: "type", kind: "rate"}}},
	{"InfrahubSync passes", "/s", []query{{metric: "vidra_infrahubsync_reconciles_total", by: "trigger", kind: "rate"}}},
	{"Memory", "MiB", []query{
		{metric: "process_resident_memory_bytes", kind: "gauge", scale: 1.0 / (1 << 20), legend: "RSS"},
		{metric: "go_memstats_heap_inuse_bytes", kind: "gauge", scale: 1.0 / (1 << 20), legend: "heap"},
	}},
}

func label(k, v string) func(map[string]string) bool {
	return func(l map[string]string) bool { return l[k] == v }
}

// series is one drawn line: its legend and a value per scrape (NaN where
// it has none).
type series struct {
	legend string
	values []float64
}

// grouped sums the samples of q in one scrape by q.by.
func grouped(q query, m testenv.Metrics) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m[q.metric] {
		if q.match != nil && !q.match(s.Labels) {
			continue
		}
		key := q.legend
		if q.by != "" {
			key = s.Labels[q.by]
		}
		out[key] += s.Value
	}
	return out
}

// p99 is the 99th percentile of the observations between two scrapes of a
// histogram's buckets, by linear interpolation within the bucket.
func p99(q query, prev, cur testenv.Metrics) float64 {
	type bucket struct{ le, n float64 }
	sum := func(m testenv.Metrics) map[float64]float64 {
		out := map[float64]float64{}
		for _, s := range m[q.metric] {
			if q.match != nil && !q.match(s.Labels) {
				continue
			}
			le, err := strconv.ParseFloat(s.Labels["le"], 64)
			if err != nil {
				continue
			}
			out[le] += s.Value
		}
		return out
	}
	a, b := sum(prev), sum(cur)
	var bs []bucket
	for le, n := range b {
		bs = append(bs, bucket{le, n - a[le]})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) == 0 || bs[len(bs)-1].n <= 0 {
		return math.NaN()
	}
	rank := 0.99 * bs[len(bs)-1].n
	lower, below := 0.0, 0.0
	for _, x := range bs {
		if x.n >= rank {
			if math.IsInf(x.le, 1) {
				return lower
			}
			if x.n == below {
				return x.le
			}
			return lower + (x.le-lower)*(rank-below)/(x.n-below)
		}
		lower, below = x.le, x.n
	}
	return lower
}

// evaluate draws the lines of a panel over the scrapes.
func evaluate(p panel, scrapes []scrape) []series {
	lines := map[string][]float64{}
	var order []string
	put := func(key string, i int, v float64) {
		if _, ok := lines[key]; !ok {
			vals := make([]float64, len(scrapes))
			for j := range vals {
				vals[j] = math.NaN()
			}
			lines[key] = vals
			order = append(order, key)
		}
		lines[key][i] = v
	}
	for _, q := range p.queries {
		scale := q.scale
		if scale == 0 {
			scale = 1
		}
		for i, s := range scrapes {
			switch q.kind {
			case "gauge":
				for k, v := range grouped(q, s.metrics) {
					put(k, i, v*scale)
				}
			case "rate":
				if i == 0 {
					continue
				}
				prev := grouped(q, scrapes[i-1].metrics)
				for k, v := range grouped(q, s.metrics) {
					d := v - prev[k]
					if d < 0 { // a restart: the counter starts again
						d = v
					}
					put(k, i, d/(s.at-scrapes[i-1].at)*scale)
				}
			case "p99":
				if i == 0 {
					continue
				}
				if v := p99(q, scrapes[i-1].metrics, s.metrics); !math.IsNaN(v) {
					put(q.legend, i, v)
				}
			}
		}
	}
	slices.Sort(order)
	var out []series
	for _, k := range order {
		legend := k
		if legend == "" {
			legend = "(none)"
		}
		out = append(out, series{legend, lines[k]})
	}
	return out
}

var palette = []string{"#73bf69", "#f2cc0c", "#5794f2", "#ff780a", "#b877d9", "#f2495c", "#8ab8ff", "#fade2a"}

const (
	panelW, panelH = 600, 230
	cols           = 2
	pad            = 12
)

func render(args []string) error {
	fs := flag.NewFlagSet("render", flag.ExitOnError)
	in := fs.String("in", "recording.txt", "a recording")
	out := fs.String("out", "dashboard.svg", "the SVG to write")
	_ = fs.Parse(args)
	scrapes, err := readRecording(*in)
	if err != nil {
		return err
	}
	rows := (len(panels) + cols - 1) / cols
	width, height := cols*(panelW+pad)+pad, rows*(panelH+pad)+pad+36
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#111217"/>`+"\n")
	minutes := (scrapes[len(scrapes)-1].at - scrapes[0].at) / 60
	fmt.Fprintf(&b, `<text x="%d" y="26" fill="#ccccdc" font-size="18">Vidra — %.0f minutes recorded from a live operator, one scrape every %.0fs</text>`+"\n",
		pad, minutes, (scrapes[len(scrapes)-1].at-scrapes[0].at)/float64(len(scrapes)-1))
	for i, p := range panels {
		x := pad + (i%cols)*(panelW+pad)
		y := 36 + pad + (i/cols)*(panelH+pad)
		drawPanel(&b, p, evaluate(p, scrapes), x, y)
	}
	b.WriteString("</svg>\n")
	return os.WriteFile(*out, []byte(b.String()), 0o644)
}

func drawPanel(b *strings.Builder, p panel, lines []series, x, y int) {
	fmt.Fprintf(b, `<g transform="translate(%d,%d)"><rect width="%d" height="%d" rx="3" fill="#181b1f" stroke="#2c3235"/>`+"\n", x, y, panelW, panelH)
	fmt.Fprintf(b, `<text x="10" y="20" fill="#ccccdc" font-size="14" font-weight="bold">%s</text>`+"\n", esc(p.title))
	const left, top, plotW, plotH = 56, 32, panelW - 70, panelH - 82
	maxV := 0.0
	for _, s := range lines {
		for _, v := range s.values {
			if !math.IsNaN(v) && v > maxV {
				maxV = v
			}
		}
	}
	if maxV == 0 {
		maxV = 1
	}
	maxV = niceCeil(maxV)
	for k := 0; k <= 4; k++ {
		gy := top + plotH - plotH*k/4
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#2c3235"/>`, left, gy, left+plotW, gy)
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="#8e8e8e" font-size="10" text-anchor="end">%s</text>`+"\n", left-4, gy+3, format(maxV*float64(k)/4, p.unit))
	}
	for i, s := range lines {
		n := len(s.values)
		var pts []string
		flush := func() {
			if len(pts) > 1 {
				fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", palette[i%len(palette)], strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for j, v := range s.values {
			if math.IsNaN(v) {
				flush()
				continue
			}
			px := float64(left) + float64(plotW)*float64(j)/float64(max(n-1, 1))
			py := float64(top+plotH) - float64(plotH)*v/maxV
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
		}
		flush()
		lx, ly := 10+(i%3)*195, panelH-38+(i/3)*14
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="3" fill="%s"/><text x="%d" y="%d" fill="#ccccdc" font-size="11">%s</text>`+"\n",
			lx, ly-4, palette[i%len(palette)], lx+14, ly, esc(truncate(s.legend, 28)))
	}
	if len(lines) == 0 {
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="#8e8e8e" font-size="12" text-anchor="middle">No data</text>`+"\n", panelW/2, panelH/2)
	}
	b.WriteString("</g>\n")
}

func niceCeil(v float64) float64 {
	exp := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*exp {
			return m * exp
		}
	}
	return 10 * exp
}

func format(v float64, unit string) string {
	s := strconv.FormatFloat(v, 'g', 3, 64)
	if unit == "" {
		return s
	}
	return s + " " + unit
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/vidra-operator/vidra/internal/plugin/render"
	"github.com/vidra-operator/vidra/internal/wakeups"
)

// wakeupsOptions are the flags of kubectl vidra wakeups.
type wakeupsOptions struct {
	logs         []string
	output       string
	client       string
	since, until string
	budgets      []string
	plot         string
	top          int
}

// wakeupsResult is what -o json prints.
type wakeupsResult struct {
	wakeups.Report
	Budgets []wakeups.BudgetResult `json:"budgets,omitempty"`
}

func newWakeups(r *root) *cobra.Command {
	o := &wakeupsOptions{}
	cmd := &cobra.Command{
		Use:   "wakeups --audit-log FILE|- [--audit-log FILE...]",
		Short: "Tell which clients wake the API server, how often, and why, from its audit log",
		Long: `wakeups reads the API server's audit log (JSON lines of audit.k8s.io/v1 Events,
gzip or not; several files for several API servers; - for stdin) and prints, for
every client (user and user agent without its version), worst first, its
requests per hour by cause (lease-renewal, watch-restart, relist, requeue-poll,
resync, heartbeat, hot-loop, fight, or unexplained), each stream's period and
jitter, its top objects, and what an event-driven client would save. It needs
no cluster. Exit code 1 when a --budget is exceeded, 2 on an error.`,
		Example: `  kubectl vidra wakeups --audit-log /var/log/kubernetes/audit.log
  kubectl vidra wakeups --audit-log audit.log.gz --client kube-controller-manager/namespace-controller
  kubectl vidra wakeups --audit-log audit.log --since 2026-11-29T10:00:00Z --budget vidra=120/h
  kubectl vidra wakeups --audit-log - --plot wakeups.svg -o json < audit.log`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.run(r, cmd); err != nil {
				var e *exitError
				if errors.As(err, &e) {
					return err
				}
				return exit(2, err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.logs, "audit-log", nil, "An audit log file (JSON lines, gzip accepted), or - for stdin; repeat for several API servers.")
	f.StringVar(&o.client, "client", "", "Show only the clients whose name or user contains this.")
	f.StringVar(&o.since, "since", "", "Count only requests received at or after this time (RFC 3339).")
	f.StringVar(&o.until, "until", "", "Count only requests received before this time (RFC 3339).")
	f.StringArrayVar(&o.budgets, "budget", nil, "CLIENT=N/h: exit 1 when the clients of that name or user make more than N requests an hour (repeatable).")
	f.StringVar(&o.plot, "plot", "", "Also draw the requests as SVG into this file: a lane per client, a mark per request coloured by cause.")
	f.IntVar(&o.top, "top", 5, "Streams shown per client (all with --client).")
	addOutput(cmd, &o.output, "", "json")
	_ = cmd.MarkFlagRequired("audit-log")
	return cmd
}

func (o *wakeupsOptions) run(r *root, cmd *cobra.Command) error {
	if err := checkOutput(o.output, "", "json"); err != nil {
		return err
	}
	since, err := parseTime("since", o.since)
	if err != nil {
		return err
	}
	until, err := parseTime("until", o.until)
	if err != nil {
		return err
	}
	var budgets []wakeups.Budget
	for _, s := range o.budgets {
		b, err := wakeups.ParseBudget(s)
		if err != nil {
			return err
		}
		budgets = append(budgets, b)
	}
	var rd wakeups.Reader
	a := wakeups.NewAnalyzer(wakeups.DefaultLimits, since, until)
	for _, path := range o.logs {
		if err := readLog(cmd, path, &rd, a); err != nil {
			return err
		}
	}
	rep := a.Report(rd.Coverage())
	results := wakeups.CheckBudgets(rep, budgets)
	if o.client != "" {
		rep.Clients = slices.DeleteFunc(rep.Clients, func(c wakeups.Client) bool {
			return !strings.Contains(c.Name, o.client) && !strings.Contains(c.User, o.client)
		})
	}
	if o.plot != "" {
		if err := writePlot(o.plot, rep); err != nil {
			return err
		}
	}
	if o.output == "json" {
		if err := printData(r.streams.Out, wakeupsResult{Report: rep, Budgets: results}, "json"); err != nil {
			return err
		}
	} else {
		top := o.top
		if o.client != "" {
			top = 0
		}
		if err := printWakeups(r.streams.Out, rep, results, top); err != nil {
			return err
		}
	}
	for _, b := range results {
		if !b.OK {
			return exit(1, nil)
		}
	}
	return nil
}

// readLog reads one log into a, "-" being stdin.
func readLog(cmd *cobra.Command, path string, rd *wakeups.Reader, a *wakeups.Analyzer) error {
	var src io.Reader = cmd.InOrStdin()
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		src = f
	}
	if err := rd.Read(src, a.Add); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

func writePlot(path string, rep wakeups.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := wakeups.WritePlot(f, rep); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func parseTime(flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--%s: %w", flag, err)
	}
	return t, nil
}

// printWakeups prints the report for a person: coverage first, so that a
// clean result is never a blind one, then a table per client. Every string
// from the log goes through render.Safe or OneLine.
func printWakeups(out io.Writer, rep wakeups.Report, budgets []wakeups.BudgetResult, top int) error {
	cov := rep.Coverage
	fmt.Fprintf(out, "Window: %s to %s (%s)\n", rep.From.Format(time.RFC3339), rep.To.Format(time.RFC3339), rep.To.Sub(rep.From).Round(time.Second))
	fmt.Fprintf(out, "Coverage: %d files, %d lines, %d requests; %d malformed and %d too long lines skipped, %d stage events deduplicated, %d requests seen at RequestReceived only, %d outside the window\n",
		cov.Files, cov.Lines, cov.Requests, cov.Malformed, cov.TooLong, cov.Deduplicated, cov.OnlyReceived, rep.OutOfWindow)
	var stages []string
	for _, s := range []string{wakeups.StageRequestReceived, wakeups.StageResponseStarted, wakeups.StageResponseComplete, wakeups.StagePanic} {
		stages = append(stages, fmt.Sprintf("%s %d", s, cov.Stages[s]))
	}
	fmt.Fprintf(out, "Stages: %s; reads %d, writes %d\n", strings.Join(stages, ", "), rep.Reads, rep.Writes)
	for _, w := range rep.Warnings {
		fmt.Fprintf(out, "Warning: %s\n", render.OneLine(w))
	}
	for _, c := range rep.Clients {
		fmt.Fprintf(out, "\nCLIENT %s (user %s): %s requests/h, event-driven would save %s/h\n", render.Safe(c.Name), render.Safe(c.User), rate(c.PerHour), rate(c.Savable))
		var causes []string
		for _, cause := range wakeups.Causes {
			if v, ok := c.ByCause[cause]; ok {
				causes = append(causes, fmt.Sprintf("%s %s/h", cause, rate(v)))
			}
		}
		fmt.Fprintf(out, "  by cause: %s\n", strings.Join(causes, ", "))
		if len(c.TopObjects) > 0 {
			objs := make([]string, len(c.TopObjects))
			for i, o := range c.TopObjects {
				objs[i] = render.Safe(o)
			}
			fmt.Fprintf(out, "  top objects: %s\n", strings.Join(objs, ", "))
		}
		tw := printers.GetNewTabWriter(out)
		fmt.Fprintln(tw, "  CAUSE\tREQ/H\tN\tPERIOD\tJITTER\tVERB\tRESOURCE\tOBJECT\tRULE")
		for i, s := range c.Streams {
			if top > 0 && i == top {
				fmt.Fprintf(tw, "  ...\t%d more streams\t\t\t\t\t\t\t\n", len(c.Streams)-top)
				break
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Cause, rate(s.PerHour), s.Requests,
				seconds(s.PeriodSeconds), seconds(s.JitterSeconds), render.Safe(s.Verb), render.Safe(s.Resource), render.Safe(s.Object()), render.OneLine(s.Reason))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, b := range budgets {
		verdict := "within"
		switch {
		case b.Clients == 0:
			verdict = "NOT CHECKED: no such client in the log"
		case !b.OK:
			verdict = "EXCEEDED"
		}
		fmt.Fprintf(out, "\nBudget %s: %s/h of %s/h: %s\n", render.Safe(b.Client), rate(b.Spent), rate(b.PerHour), verdict)
	}
	return nil
}

// rate prints requests per hour: whole numbers, one decimal below 10.
func rate(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// seconds prints a period, "-" when there is none.
func seconds(s float64) string {
	if s <= 0 {
		return "-"
	}
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

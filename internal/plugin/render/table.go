// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// none stands for a value not known yet, as kubectl prints it.
const none = "<none>"

// Options are what every text rendering needs.
type Options struct {
	// Now is the time ages are measured to.
	Now time.Time
	// Color adds ANSI colours; only on a terminal.
	Color bool
}

// ANSI colours of statuses on a terminal.
const (
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	bold   = "\x1b[1m"
	reset  = "\x1b[0m"
)

func (o Options) paint(c, s string) string {
	if !o.Color || c == "" || s == "" {
		return s
	}
	return c + s + reset
}

// statusColor colours a condition status or health the way a person reads
// it: green for good, red for failed, yellow for in between.
func statusColor(s string) string {
	switch s {
	case "True", "Current", string(v1alpha1.DeployStateSucceeded), v1alpha1.ReasonAllCurrent:
		return green
	case "False", string(v1alpha1.DeployStateFailed), v1alpha1.ReasonDegraded, "NotFound":
		return red
	case "", none:
		return ""
	default:
		return yellow
	}
}

// Age writes the time since t as kubectl's AGE column does ("5m", "3d").
func Age(t time.Time, now time.Time) string {
	if t.IsZero() {
		return none
	}
	return duration.HumanDuration(now.Sub(t))
}

// TableOptions choose the columns of the get table.
type TableOptions struct {
	Options
	// AllNamespaces adds the NAMESPACE column.
	AllNamespaces bool
	// Wide adds SUSPENDED, LAST SYNC and MESSAGE, as -o wide does.
	Wide bool
}

// Table writes the table of kubectl vidra get: the columns of kubectl get
// vr, with the health of the managed objects and the drift counted.
//
//	NAME   READY   STATUS      HEALTHY   MANAGED   DRIFTED   CORRECTED   AGE
//	web    True    Succeeded   5/5       5         0         2           3d
//
// HEALTHY counts the objects whose health is Current; DRIFTED the objects
// that differ from the manifest now (driftPolicy Report); CORRECTED the
// drift corrections of the history (at most its last 10).
func Table(w io.Writer, items []v1alpha1.VidraResource, o TableOptions) error {
	tw := printers.GetNewTabWriter(w)
	head := []string{"NAME", "READY", "STATUS", "HEALTHY", "MANAGED", "DRIFTED", "CORRECTED", "AGE"}
	if o.AllNamespaces {
		head = append([]string{"NAMESPACE"}, head...)
	}
	if o.Wide {
		head = append(head, "SUSPENDED", "LAST SYNC", "MESSAGE")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for i := range items {
		vr := &items[i]
		ready, msg := condition(vr, v1alpha1.ConditionReady)
		state := string(vr.Status.DeployState)
		if state == "" {
			state = none
		}
		row := []string{
			Safe(vr.Name),
			o.paint(statusColor(ready), Safe(ready)),
			o.paint(statusColor(state), Safe(state)),
			healthCount(vr),
			fmt.Sprint(len(vr.Status.ManagedResources)),
			fmt.Sprint(len(vr.Status.Drift)),
			fmt.Sprint(len(vr.Status.DriftHistory)),
			Age(vr.CreationTimestamp.Time, o.Now),
		}
		if o.AllNamespaces {
			row = append([]string{Safe(vr.Namespace)}, row...)
		}
		if o.Wide {
			lastSync := none
			if vr.Status.LastSyncTime != nil {
				lastSync = Age(vr.Status.LastSyncTime.Time, o.Now)
			}
			row = append(row, fmt.Sprint(vr.Spec.Suspend), lastSync, OneLine(msg))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// condition returns the status and message of the condition of type t, if
// it describes the resource's current generation; a condition of an older
// generation, or none, is Unknown.
func condition(vr *v1alpha1.VidraResource, t string) (status, message string) {
	c := meta.FindStatusCondition(vr.Status.Conditions, t)
	if c == nil {
		return "Unknown", ""
	}
	if c.ObservedGeneration != 0 && c.ObservedGeneration != vr.Generation {
		return "Unknown", "not reconciled since the last change of the spec (generation " + fmt.Sprint(vr.Generation) + ")"
	}
	return string(c.Status), c.Message
}

// healthCount says how many managed objects are healthy: "4/5".
func healthCount(vr *v1alpha1.VidraResource) string {
	current := 0
	for _, m := range vr.Status.ManagedResources {
		if m.Health == "Current" {
			current++
		}
	}
	return fmt.Sprintf("%d/%d", current, len(vr.Status.ManagedResources))
}

// conditionTime is a condition's last transition, or zero.
func conditionTime(c *metav1.Condition) time.Time {
	if c == nil {
		return time.Time{}
	}
	return c.LastTransitionTime.Time
}

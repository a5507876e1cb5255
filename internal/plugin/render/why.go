// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// maxEvents bounds the Events why shows: the most recent say enough.
const maxEvents = 10

// Explanation is why a VidraResource is, or is not, Ready.
type Explanation struct {
	Namespace  string             `json:"namespace"`
	Name       string             `json:"name"`
	Ready      bool               `json:"ready"`
	Suspended  bool               `json:"suspended,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Failing are the objects the conditions or their health name as not
	// fine, with the API server's or the health check's message.
	Failing []Failure `json:"failing,omitempty"`
	// Problems are the errors the conditions report that concern no one
	// object (a manifest that does not parse, the destination).
	Problems []string `json:"problems,omitempty"`
	// Events are the most recent Warning Events of the resource.
	Events []Event `json:"events,omitempty"`
	// Next says when Vidra tries again, or what makes it.
	Next string `json:"next,omitempty"`
}

// Failure is one object that is not fine.
type Failure struct {
	// Object is Kind namespace/name, as the operator names it.
	Object  string `json:"object"`
	Problem string `json:"problem"`
}

// Event is a Warning Event of the resource.
type Event struct {
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count,omitempty"`
	Last    time.Time `json:"last"`
}

// objectError matches a part of a condition message that the operator
// wrote for one object: "ConfigMap ns/name (document 2): <error>", or
// "Namespace old: <error>" for an object in no document (one left out of
// the manifest). Without a document the name must look like Kind name, so
// that a message such as `Get "https://…": …` is not taken for an object.
// "(document -1)" is what earlier versions wrote for the latter.
var objectError = regexp.MustCompile(`^(\S+ \S+) \(document -?\d+\): (.*)$|^([A-Z][A-Za-z0-9]* [^\s":]+): (.*)$`)

// Explain gathers why vr is or is not Ready from its status and events
// (any Events; only the Warning ones whose object is vr are kept). now is
// for the time of the next attempt.
func Explain(vr *v1alpha1.VidraResource, events []corev1.Event, now time.Time) *Explanation {
	ready, _ := condition(vr, v1alpha1.ConditionReady)
	x := &Explanation{Namespace: vr.Namespace, Name: vr.Name, Ready: ready == "True", Suspended: vr.Spec.Suspend}
	order := map[string]int{v1alpha1.ConditionReady: 0, v1alpha1.ConditionStalled: 1, v1alpha1.ConditionReconciling: 2,
		v1alpha1.ConditionConflict: 3, v1alpha1.ConditionHealthy: 4, v1alpha1.ConditionDrifted: 5}
	x.Conditions = slices.Clone(vr.Status.Conditions)
	slices.SortStableFunc(x.Conditions, func(a, b metav1.Condition) int {
		return cmp.Compare(rank(order, a.Type), rank(order, b.Type))
	})

	seen := map[string]bool{}
	add := func(object, problem string) {
		if k := object + "\x00" + problem; !seen[k] {
			seen[k] = true
			x.Failing = append(x.Failing, Failure{Object: object, Problem: problem})
		}
	}
	problems := map[string]bool{}
	for _, t := range []string{v1alpha1.ConditionReady, v1alpha1.ConditionStalled, v1alpha1.ConditionConflict} {
		c := meta.FindStatusCondition(vr.Status.Conditions, t)
		if c == nil || (t == v1alpha1.ConditionReady && c.Status == metav1.ConditionTrue) || (t != v1alpha1.ConditionReady && c.Status != metav1.ConditionTrue) {
			continue
		}
		for _, part := range splitMessage(c.Message) {
			if m := objectError.FindStringSubmatch(part); m != nil {
				add(m[1]+m[3], m[2]+m[4])
			} else if t != v1alpha1.ConditionReady || !x.Ready {
				if !problems[part] {
					problems[part] = true
					x.Problems = append(x.Problems, part)
				}
			}
		}
	}
	for _, m := range vr.Status.ManagedResources {
		if m.Health == "" || m.Health == "Current" {
			continue
		}
		ref := m.Kind + " " + m.Name
		if m.Namespace != "" {
			ref = m.Kind + " " + m.Namespace + "/" + m.Name
		}
		msg := m.Health
		if m.HealthMessage != "" {
			msg += ": " + m.HealthMessage
		}
		add(ref, msg)
	}
	// A condition's message for the whole resource repeats what the
	// objects say; keep the general problems only when no object says it.
	if len(x.Failing) > 0 {
		x.Problems = slices.DeleteFunc(x.Problems, func(p string) bool {
			return strings.HasPrefix(p, "Applied and in sync") || strings.HasPrefix(p, "Not healthy within")
		})
	}

	for _, e := range events {
		if e.Type != corev1.EventTypeWarning || e.InvolvedObject.Name != vr.Name || (e.InvolvedObject.UID != "" && e.InvolvedObject.UID != vr.UID) {
			continue
		}
		x.Events = append(x.Events, Event{Reason: e.Reason, Message: e.Message, Count: e.Count, Last: eventTime(e)})
	}
	slices.SortStableFunc(x.Events, func(a, b Event) int { return b.Last.Compare(a.Last) })
	if len(x.Events) > maxEvents {
		x.Events = x.Events[:maxEvents]
	}
	x.Next = next(vr, x.Ready, now)
	return x
}

func rank(order map[string]int, t string) int {
	if r, ok := order[t]; ok {
		return r
	}
	return len(order)
}

// splitMessage splits a condition message into the errors the operator
// joined with "; ", dropping the retry preamble.
func splitMessage(msg string) []string {
	msg = strings.TrimPrefix(msg, "Retrying with backoff: ")
	var out []string
	for _, p := range strings.Split(msg, "; ") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// eventTime is when an Event last happened, whichever field its writer
// filled.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	default:
		return e.FirstTimestamp.Time
	}
}

// next says when the operator looks at the resource again. The operator
// does not publish its retry times (they live in its rate-limited work
// queue), so where they are unknown this says what triggers the next
// attempt instead.
func next(vr *v1alpha1.VidraResource, ready bool, now time.Time) string {
	// Hints carry the namespace: pasted from another one, they must still
	// name this resource.
	target := vr.Name + " -n " + vr.Namespace
	interval := ""
	if vr.Spec.Interval != nil && vr.Spec.Interval.Duration > 0 {
		interval = vr.Spec.Interval.Duration.String()
	}
	periodic := ""
	switch {
	case vr.Spec.Interval == nil:
		periodic = "; besides, it is re-checked periodically (the operator's requeueResourcesAfter, 10m by default)"
	case interval != "":
		periodic = "; besides, it is re-checked every " + interval
	}
	readyCond := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
	reconciling := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReconciling)
	stalled := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionStalled)
	switch {
	case vr.Spec.Suspend:
		return "nothing: the resource is suspended; `kubectl vidra resume " + target + "` resumes it"
	case vr.DeletionTimestamp != nil:
		return "the resource is being deleted: Vidra retries the cleanup with backoff until its finalizer can be removed"
	case readyCond == nil || vr.Status.ObservedGeneration != vr.Generation:
		return "the operator has not reconciled the latest change yet: it does at once if it runs (is it running, and does it watch namespace " + vr.Namespace + "?)"
	case ready:
		return "nothing to fix; Vidra corrects drift as it happens" + periodic
	case readyCond.Reason == v1alpha1.ReasonDependencyNotReady:
		return "when the dependency becomes Ready: Vidra is woken at once, no retry timer is involved"
	case readyCond.Reason == v1alpha1.ReasonProgressing && vr.Spec.Wait && vr.Status.HealthCheckStartTime != nil:
		deadline := vr.Status.HealthCheckStartTime.Add(vr.EffectiveTimeout())
		left := "passed"
		if deadline.After(now) {
			left = "in " + Age(now, deadline)
		}
		return fmt.Sprintf("when an object's health changes (Vidra is woken at once); the wait for health gives up at %s (%s, spec.timeout %s)",
			deadline.UTC().Format(time.RFC3339), left, vr.EffectiveTimeout())
	case readyCond.Reason == v1alpha1.ReasonHealthCheckFailed:
		return "when an object's health changes: a later recovery still makes the resource Ready; a change of the spec starts a new wait"
	case reconciling != nil && reconciling.Status == metav1.ConditionTrue:
		s := "Vidra retries with backoff; the operator does not publish when (its work queue doubles the delay after each failure, up to its cap); `kubectl vidra reconcile " + target + "` tries now"
		if stalled != nil && stalled.Status == metav1.ConditionTrue {
			s += ". It is Stalled: most likely only a change by a person fixes it"
		}
		return s + periodic
	default:
		return "after a change: Vidra does not retry this on its own; fix the resource (a new generation is reconciled at once), then `kubectl vidra reconcile " + target + "` if the fix was elsewhere" + periodic
	}
}

// WriteExplanation writes x for a person, on one screen.
func WriteExplanation(w io.Writer, x *Explanation, o Options) error {
	var b strings.Builder
	state := o.paint(red, "not Ready")
	switch {
	case x.Suspended:
		state = o.paint(yellow, "suspended")
	case x.Ready:
		state = o.paint(green, "Ready")
	}
	// Every value below comes from the resource's status, its Events or
	// the objects of its destination: it goes through Safe or OneLine.
	fmt.Fprintf(&b, "%s %s/%s is %s.\n", o.paint(bold, "VidraResource"), Safe(x.Namespace), Safe(x.Name), state)

	b.WriteString("\n" + o.paint(bold, "Conditions:") + "\n")
	if len(x.Conditions) == 0 {
		b.WriteString("  none yet: the operator has not reconciled it\n")
	}
	said := map[string]string{}
	for _, c := range x.Conditions {
		status := fmt.Sprintf("%-7s", Safe(string(c.Status)))
		fmt.Fprintf(&b, "  %-12s %s %s (%s ago)\n", Safe(c.Type), o.paint(statusColor(string(c.Status)), status), Safe(c.Reason), Age(conditionTime(&c), o.Now))
		// Ready, Stalled and Reconciling often carry one message; say it once.
		msg := strings.TrimPrefix(c.Message, "Retrying with backoff: ")
		switch first, seen := said[msg]; {
		case c.Message == "":
		case seen:
			fmt.Fprintf(&b, "               (the message of %s)\n", Safe(first))
		default:
			said[msg] = c.Type
			fmt.Fprintf(&b, "               %s\n", OneLine(c.Message))
		}
	}
	if len(x.Failing) > 0 {
		b.WriteString("\n" + o.paint(bold, "Objects failing or not healthy:") + "\n")
		for _, f := range x.Failing {
			fmt.Fprintf(&b, "  %s\n      %s\n", Safe(f.Object), OneLine(f.Problem))
		}
	}
	if len(x.Problems) > 0 {
		b.WriteString("\n" + o.paint(bold, "Problems:") + "\n")
		for _, p := range x.Problems {
			fmt.Fprintf(&b, "  %s\n", OneLine(p))
		}
	}
	b.WriteString("\n" + o.paint(bold, "Recent warning events:") + "\n")
	if len(x.Events) == 0 {
		b.WriteString("  none\n")
	}
	for _, e := range x.Events {
		count := ""
		if e.Count > 1 {
			count = fmt.Sprintf(" (x%d)", e.Count)
		}
		fmt.Fprintf(&b, "  %s ago  %s%s: %s\n", Age(e.Last, o.Now), Safe(e.Reason), count, OneLine(e.Message))
	}
	fmt.Fprintf(&b, "\n%s %s\n", o.paint(bold, "Next attempt:"), Safe(x.Next))
	_, err := io.WriteString(w, b.String())
	return err
}

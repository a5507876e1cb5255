// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeups

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is the analysis: every client, worst first, and what the log
// showed and hid.
type Report struct {
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	Hours float64   `json:"hours"`
	// Coverage is what the reader read; Folded what went past the
	// Analyzer's Limits; OutOfWindow the requests outside --since and
	// --until.
	Coverage    Coverage `json:"coverage"`
	Folded      Folded   `json:"folded"`
	OutOfWindow int64    `json:"outOfWindow"`
	Reads       int64    `json:"reads"`
	Writes      int64    `json:"writes"`
	// Warnings say what may hide requests from the result.
	Warnings []string `json:"warnings,omitempty"`
	Clients  []Client `json:"clients"`
}

// Client is one client: a user and a user agent without its version.
type Client struct {
	Name     string  `json:"name"`
	User     string  `json:"user"`
	Requests int64   `json:"requests"`
	PerHour  float64 `json:"perHour"`
	// ByCause is requests per hour by cause.
	ByCause map[Cause]float64 `json:"byCause"`
	// Savable is the requests per hour an event-driven client would not
	// make (Cause.Saving).
	Savable    float64  `json:"savablePerHour"`
	TopObjects []string `json:"topObjects,omitempty"`
	Streams    []Stream `json:"streams"`
}

// Stream is one verb on one resource and object, collection or selector.
type Stream struct {
	Verb string `json:"verb"`
	// Resource is group/resource/subresource ("resource" for the core
	// group), or the path of a non-resource request.
	Resource      string  `json:"resource"`
	Namespace     string  `json:"namespace,omitempty"`
	Name          string  `json:"name,omitempty"`
	Selector      string  `json:"selector,omitempty"`
	Requests      int64   `json:"requests"`
	PerHour       float64 `json:"perHour"`
	PeriodSeconds float64 `json:"periodSeconds"`
	JitterSeconds float64 `json:"jitterSeconds"`
	Burstiness    float64 `json:"burstiness"`
	Verdict
	// Times are the stream's kept request times, for the plot.
	Times []time.Time `json:"-"`
}

// Object names the stream's target: namespace/name, a selector, or the
// collection.
func (s Stream) Object() string {
	switch {
	case s.Name != "" && s.Namespace != "":
		return s.Namespace + "/" + s.Name
	case s.Name != "":
		return s.Name
	case s.Selector != "":
		return s.Selector
	case s.Namespace != "":
		return s.Namespace + "/*"
	}
	return "*"
}

// Report decides every stream's cause and sums them per client. cov is
// the reader's Coverage.
func (a *Analyzer) Report(cov Coverage) Report {
	rep := Report{Coverage: cov, Folded: a.folded, OutOfWindow: a.outOfWindow, Reads: a.reads, Writes: a.writes}
	from, to := time.Unix(0, a.first), time.Unix(0, a.last)
	if !a.since.IsZero() {
		from = a.since
	}
	if !a.until.IsZero() {
		to = a.until
	}
	if a.first == 0 {
		from, to = a.since, a.until
	}
	rep.From, rep.To = from.UTC(), to.UTC()
	span := max(to.Sub(from), time.Second)
	rep.Hours = span.Hours()
	rep.Warnings = warnings(rep)

	names := make([]string, len(a.order))
	for i, c := range a.order {
		names[i] = c.key.name
	}
	clients := make([]Client, len(a.order))
	for i, c := range a.order {
		clients[i] = Client{Name: c.key.name, User: c.key.user, Requests: c.requests, PerHour: float64(c.requests) / rep.Hours, ByCause: map[Cause]float64{}}
	}
	resync := a.resyncPeriods()
	for _, s := range a.streams {
		ts := sortedTimes(s.times)
		f := a.facts(s, ts, names)
		f.ResyncPeriod = resync[groupKey{client: s.key.client, verb: s.key.verb, group: s.key.group, resource: s.key.resource, subresource: s.key.subresource}]
		v := classify(f)
		st := Stream{
			Verb: s.key.verb, Resource: resourceName(s.key), Namespace: s.key.namespace, Name: s.key.name, Selector: s.key.selector,
			Requests: s.n, PerHour: float64(s.n) / rep.Hours,
			PeriodSeconds: f.Timing.Period.Seconds(), JitterSeconds: f.Timing.Jitter.Seconds(), Burstiness: f.Timing.Burstiness,
			Verdict: v, Times: make([]time.Time, len(ts)),
		}
		for i, t := range ts {
			st.Times[i] = time.Unix(0, t).UTC()
		}
		c := &clients[s.key.client]
		c.Streams = append(c.Streams, st)
		c.ByCause[v.Cause] += st.PerHour
		c.Savable += st.PerHour * v.Cause.Saving()
	}
	for i := range clients {
		c := &clients[i]
		slices.SortFunc(c.Streams, func(x, y Stream) int {
			return cmp.Or(cmp.Compare(y.Requests, x.Requests), strings.Compare(x.Resource, y.Resource), strings.Compare(x.Verb, y.Verb), strings.Compare(x.Object(), y.Object()))
		})
		for _, s := range c.Streams {
			if s.Name != "" && len(c.TopObjects) < 3 {
				c.TopObjects = append(c.TopObjects, s.Object()+" ("+s.Resource+")")
			}
		}
	}
	// Worst first: what an event-driven client would save, then the rate.
	slices.SortStableFunc(clients, func(x, y Client) int {
		return cmp.Or(cmp.Compare(y.Savable, x.Savable), cmp.Compare(y.PerHour, x.PerHour), strings.Compare(x.Name, y.Name), strings.Compare(x.User, y.User))
	})
	rep.Clients = clients
	return rep
}

// facts gathers what the rules read of a stream.
func (a *Analyzer) facts(s *streamState, ts []int64, names []string) Facts {
	k := s.key
	f := Facts{
		Verb: k.verb, Group: k.group, Resource: k.resource, Subresource: k.subresource,
		Named: k.name != "", Timing: timing(ts), Requests: s.n, InitialEvents: k.initial,
		NoVersion: s.noRV, After410: s.after410, Unchanged: s.unchanged, Known: s.known,
	}
	if !f.Named {
		return f
	}
	o := a.objects[objectKey{group: k.group, resource: k.resource, namespace: k.namespace, name: k.name}]
	if o == nil {
		return f
	}
	writes := slices.Clone(o.writes[:min(o.n, objectWrites)])
	slices.SortFunc(writes, func(x, y write) int { return cmp.Compare(x.at, y.at) })
	if IsWrite(k.verb) {
		rivals := map[int]int{}
		for i := 1; i < len(writes); i++ {
			if writes[i].client != writes[i-1].client {
				f.Turns++
			}
			if writes[i].client != k.client {
				rivals[writes[i].client]++
			}
		}
		if len(rivals) > 0 {
			best := slices.MaxFunc(slices.Sorted(maps.Keys(rivals)), func(x, y int) int { return cmp.Compare(rivals[x], rivals[y]) })
			f.Rival = names[best]
		}
		if len(rivals) == 0 {
			f.Turns = 0
		}
		return f
	}
	for i := 1; i < len(ts); i++ {
		for _, w := range writes {
			if w.at > ts[i-1] && w.at <= ts[i] {
				f.WrittenBetween++
				break
			}
		}
	}
	return f
}

// resyncPeriods returns the period of each group whose bursts over at
// least burstObjects objects come at a fixed period.
func (a *Analyzer) resyncPeriods() map[groupKey]time.Duration {
	out := map[groupKey]time.Duration{}
	for k, g := range a.groups {
		starts := slices.Clone(g.starts)
		sizes := slices.Clone(g.sizes)
		if g.size > 0 {
			starts = append(starts, g.start)
			sizes = append(sizes, g.size)
		}
		var big []int64
		for i, s := range starts {
			if sizes[i] >= burstObjects {
				big = append(big, s)
			}
		}
		slices.Sort(big)
		if t := timing(big); t.Periodic() {
			out[k] = t.Period
		}
	}
	return out
}

// resourceName is group/resource/subresource, without an empty group.
func resourceName(k streamKey) string {
	if k.resource == "" {
		if k.path != "" {
			return k.path
		}
		return k.verb
	}
	s := k.resource
	if k.group != "" {
		s = k.group + "/" + s
	}
	if k.subresource != "" {
		s += "/" + k.subresource
	}
	return s
}

// warnings say what the log may hide.
func warnings(rep Report) []string {
	var w []string
	c := rep.Coverage
	if c.Lines == 0 {
		w = append(w, "the log is empty")
	}
	if c.Malformed > 0 || c.TooLong > 0 {
		w = append(w, fmt.Sprintf("%d malformed and %d too long lines were skipped", c.Malformed, c.TooLong))
	}
	if c.Requests > 0 && c.Stages[StageResponseStarted] == 0 {
		w = append(w, "no ResponseStarted stage: watches are counted when they end (the policy omits the stage)")
	}
	if c.Stages[StageRequestReceived] > 0 && c.Stages[StageResponseComplete] == 0 {
		w = append(w, "no ResponseComplete stage: the policy omits it, so requests are not analysed")
	}
	if c.OnlyReceived > 0 {
		w = append(w, fmt.Sprintf("%d requests were seen at RequestReceived only and are not analysed", c.OnlyReceived))
	}
	if rep.Writes > 0 && rep.Reads == 0 {
		w = append(w, "no get, list or watch at all: the audit policy likely drops reads, so polls are invisible")
	} else if rep.Reads+rep.Writes > 0 && rep.Reads*10 < rep.Writes {
		w = append(w, fmt.Sprintf("only %d reads for %d writes: the audit policy may drop reads", rep.Reads, rep.Writes))
	}
	f := rep.Folded
	if f.Clients+f.Streams+f.Objects > 0 {
		w = append(w, fmt.Sprintf("past the bounds: %d requests folded into (other) clients, %d into (other) streams, %d of objects not followed", f.Clients, f.Streams, f.Objects))
	}
	return w
}

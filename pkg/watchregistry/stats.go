// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Stats is a snapshot of the registry's figures, the same that its
// Prometheus collector reports.
type Stats struct {
	// Informers counts the informers by state: running and lingering ones,
	// and failed ones that owners still track.
	Informers map[State]int
	// Running counts informers whose goroutines have not exited yet,
	// including stopped ones still winding down.
	Running int
	// Started counts informers started since New.
	Started uint64
	// Owners counts owners that track at least one ref.
	Owners int
	// CachedObjects counts the objects held by all caches, kept as the
	// informers deliver them rather than counted at each call.
	CachedObjects int
	// Expectations counts pending ExpectWrite and ExpectDelete expectations
	// (Write.Done makes one).
	Expectations int
	// WritesInFlight counts the writes declared with BeginWrite that have
	// not ended, nor outlasted Options.WriteHold.
	WritesInFlight int
	// Holding counts the events held now for writes in flight.
	Holding int
	// Held counts the events held for a write in flight since New; each is
	// counted in Received once, and in Delivered or Filtered once released.
	Held uint64
	// Received counts the events the informers produced, by type;
	// EventInitialList counts listed objects, EventStateChanged counts state
	// changes. A digest change is received as an EventUpdated.
	Received map[EventType]uint64
	// Delivered counts Enqueue calls.
	Delivered uint64
	// DeliveredByType counts Enqueue calls by event type: its
	// EventDigestChanged entry counts the owners woken by a change of
	// Options.WakeDigest (a health transition, say).
	DeliveredByType map[EventType]uint64
	// Filtered counts events not delivered, by reason.
	Filtered map[FilterReason]uint64
	// Budgets reports the named Budgets of the registered clusters, by
	// name: the objects their caches hold, and the most they may.
	Budgets map[string]BudgetUse
	// OverBudget counts the times a cluster's caches went over its Budget,
	// each of which put the cluster on hold and stopped its informers
	// (unless its clients changed first, which stopped them anyway).
	OverBudget uint64
}

type counters struct {
	started    atomic.Uint64
	running    atomic.Int64
	held       atomic.Uint64
	overBudget atomic.Uint64
	delivered  [len(eventTypes)]atomic.Uint64
	received   [len(eventTypes)]atomic.Uint64
	filtered   [len(filterReasons)]atomic.Uint64
}

func eventTypeIndex(t EventType) int {
	for i, x := range eventTypes {
		if x == t {
			return i
		}
	}
	panic("watchregistry: unknown event type " + string(t))
}

func filterIndex(f FilterReason) int {
	for i, x := range filterReasons {
		if x == f {
			return i
		}
	}
	panic("watchregistry: unknown filter reason " + string(f))
}

// Stats returns a snapshot of the registry's figures.
func (r *Registry[K]) Stats() Stats {
	s := Stats{
		Informers:       make(map[State]int, len(states)),
		Received:        make(map[EventType]uint64, len(receivedTypes)),
		DeliveredByType: make(map[EventType]uint64, len(eventTypes)),
		Filtered:        make(map[FilterReason]uint64, len(filterReasons)),
		Budgets:         map[string]BudgetUse{},
	}
	r.mu.Lock()
	for _, c := range r.clusters {
		if b := c.budget; b != nil && b.Name() != "" {
			s.Budgets[b.Name()] = BudgetUse{Used: b.Used(), Max: b.Max(), UsedBytes: b.UsedBytes(), MaxBytes: b.MaxBytes()}
		}
	}
	for _, e := range r.entries {
		s.Informers[e.state]++
		if e.state == StateSynced || e.state == StatePending {
			s.CachedObjects += int(e.objects.Load())
		}
	}
	s.Owners = len(r.owners)
	r.mu.Unlock()
	s.Running = int(r.stats.running.Load())
	s.Started = r.stats.started.Load()
	s.Expectations = r.exp.len()
	s.WritesInFlight, s.Holding = r.exp.inflightAndHeld()
	s.Held = r.stats.held.Load()
	s.OverBudget = r.stats.overBudget.Load()
	for i, t := range eventTypes {
		n := r.stats.delivered[i].Load()
		s.DeliveredByType[t] = n
		s.Delivered += n
	}
	for _, t := range receivedTypes {
		s.Received[t] = r.stats.received[eventTypeIndex(t)].Load()
	}
	for i, f := range filterReasons {
		s.Filtered[f] = r.stats.filtered[i].Load()
	}
	return s
}

// metrics holds the descriptions of the figures Stats reports, and the
// histograms that only the collector reports.
type metrics struct {
	informers, running, started, owners, cached, expectations *prometheus.Desc
	writesInFlight, holding, held                             *prometheus.Desc
	received, delivered, filtered                             *prometheus.Desc
	budgetUsed, budgetMax, budgetBytes, overBudget            *prometheus.Desc
	// syncDuration observes, per informer, the time from its start to the
	// end of its initial list.
	syncDuration prometheus.Histogram
	// handlerLag observes, per delivered event, the time from the
	// reflector's receipt of the event to the first Enqueue: the queueing
	// and filtering the registry adds, Map included.
	handlerLag prometheus.Histogram
}

func newMetrics(ns string) metrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, labels, nil)
	}
	return metrics{
		informers:      d("informers", "Informers by state (Pending, Synced, Forbidden, Gone, Stopped, OverBudget).", "state"),
		running:        d("informers_running", "Informers whose goroutines have not exited yet."),
		started:        d("informers_started_total", "Informers started."),
		owners:         d("owners", "Owners tracking at least one ref."),
		cached:         d("cached_objects", "Objects held by the informers' caches."),
		expectations:   d("expectations", "Pending own-write and own-delete expectations."),
		writesInFlight: d("writes_in_flight", "Own writes declared with BeginWrite and not ended yet."),
		holding:        d("events_holding", "Events held now until an own write in flight ends."),
		held:           d("events_held_total", "Events held until an own write in flight ended, then filtered or delivered."),
		received:       d("events_received_total", "Events produced by the informers, by type.", "type"),
		delivered:      d("events_delivered_total", "Owner keys handed to Enqueue, by event type.", "type"),
		filtered:       d("events_filtered_total", "Events not delivered, by reason (resync, status-only, own-write, unmapped, rejected).", "reason"),
		budgetUsed:     d("budget_objects", "Objects held by the caches of the clusters charged to a named budget.", "budget"),
		budgetMax:      d("budget_max_objects", "The most objects the caches of the clusters charged to a named budget may hold.", "budget"),
		budgetBytes:    d("budget_bytes", "Bytes taken by the objects the caches of the clusters charged to a named budget hold.", "budget"),
		overBudget:     d("over_budget_total", "Times a cluster's caches went over its budget, which stopped its informers for a hold."),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Name: "informer_sync_duration_seconds",
			Help:    "Time from an informer's start to the end of its initial list.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 15), // 5ms to about 80s
		}),
		handlerLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Name: "handler_lag_seconds",
			Help:    "Time from the reflector's receipt of an event to its first Enqueue.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16), // 50µs to about 1.6s
		}),
	}
}

// Describe implements prometheus.Collector.
func (r *Registry[K]) Describe(ch chan<- *prometheus.Desc) {
	d := r.metrics
	for _, x := range []*prometheus.Desc{d.informers, d.running, d.started, d.owners, d.cached, d.expectations, d.writesInFlight, d.holding, d.held, d.received, d.delivered, d.filtered, d.budgetUsed, d.budgetMax, d.budgetBytes, d.overBudget} {
		ch <- x
	}
	d.syncDuration.Describe(ch)
	d.handlerLag.Describe(ch)
}

// Collect implements prometheus.Collector, reporting a Stats snapshot.
func (r *Registry[K]) Collect(ch chan<- prometheus.Metric) {
	s := r.Stats()
	d := r.metrics
	for _, st := range states {
		ch <- prometheus.MustNewConstMetric(d.informers, prometheus.GaugeValue, float64(s.Informers[st]), string(st))
	}
	ch <- prometheus.MustNewConstMetric(d.running, prometheus.GaugeValue, float64(s.Running))
	ch <- prometheus.MustNewConstMetric(d.started, prometheus.CounterValue, float64(s.Started))
	ch <- prometheus.MustNewConstMetric(d.owners, prometheus.GaugeValue, float64(s.Owners))
	ch <- prometheus.MustNewConstMetric(d.cached, prometheus.GaugeValue, float64(s.CachedObjects))
	ch <- prometheus.MustNewConstMetric(d.expectations, prometheus.GaugeValue, float64(s.Expectations))
	ch <- prometheus.MustNewConstMetric(d.writesInFlight, prometheus.GaugeValue, float64(s.WritesInFlight))
	ch <- prometheus.MustNewConstMetric(d.holding, prometheus.GaugeValue, float64(s.Holding))
	ch <- prometheus.MustNewConstMetric(d.held, prometheus.CounterValue, float64(s.Held))
	for _, t := range receivedTypes {
		ch <- prometheus.MustNewConstMetric(d.received, prometheus.CounterValue, float64(s.Received[t]), string(t))
	}
	for _, t := range eventTypes {
		ch <- prometheus.MustNewConstMetric(d.delivered, prometheus.CounterValue, float64(s.DeliveredByType[t]), string(t))
	}
	for _, f := range filterReasons {
		ch <- prometheus.MustNewConstMetric(d.filtered, prometheus.CounterValue, float64(s.Filtered[f]), string(f))
	}
	for name, u := range s.Budgets {
		ch <- prometheus.MustNewConstMetric(d.budgetUsed, prometheus.GaugeValue, float64(u.Used), name)
		ch <- prometheus.MustNewConstMetric(d.budgetMax, prometheus.GaugeValue, float64(u.Max), name)
		ch <- prometheus.MustNewConstMetric(d.budgetBytes, prometheus.GaugeValue, float64(u.UsedBytes), name)
	}
	ch <- prometheus.MustNewConstMetric(d.overBudget, prometheus.CounterValue, float64(s.OverBudget))
	d.syncDuration.Collect(ch)
	d.handlerLag.Collect(ch)
}

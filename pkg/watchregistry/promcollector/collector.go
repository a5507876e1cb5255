// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package promcollector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// Source is what the collector reads: a *watchregistry.Registry of any
// owner key type.
type Source interface {
	Stats() watchregistry.Stats
}

// DefaultNamespace prefixes the metric names when New is given "".
const DefaultNamespace = "watchregistry"

// Collector reports a registry's Stats as Prometheus metrics.
type Collector struct {
	src Source

	informers, running, started, owners, cached, expectations *prometheus.Desc
	writesInFlight, holding, held                             *prometheus.Desc
	received, delivered, filtered                             *prometheus.Desc
	budgetUsed, budgetMax, budgetBytes, overBudget            *prometheus.Desc
	syncDuration, handlerLag                                  *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a collector of src's figures under namespace ("" means
// DefaultNamespace), e.g. watchregistry_informers{state="Synced"}.
func New(src Source, namespace string) *Collector {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
	}
	return &Collector{
		src:            src,
		informers:      d("informers", "Informers by state (Pending, Synced, Forbidden, Gone, Stopped, OverBudget, Refused).", "state"),
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
		syncDuration:   d("informer_sync_duration_seconds", "Time from an informer's start to the end of its initial list."),
		handlerLag:     d("handler_lag_seconds", "Time from the reflector's receipt of an event to its first Enqueue."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, x := range []*prometheus.Desc{c.informers, c.running, c.started, c.owners, c.cached, c.expectations, c.writesInFlight, c.holding, c.held, c.received, c.delivered, c.filtered, c.budgetUsed, c.budgetMax, c.budgetBytes, c.overBudget, c.syncDuration, c.handlerLag} {
		ch <- x
	}
}

// Collect implements prometheus.Collector, reporting one Stats snapshot.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for st, n := range s.Informers {
		gauge(c.informers, float64(n), string(st))
	}
	gauge(c.running, float64(s.Running))
	counter(c.started, s.Started)
	gauge(c.owners, float64(s.Owners))
	gauge(c.cached, float64(s.CachedObjects))
	gauge(c.expectations, float64(s.Expectations))
	gauge(c.writesInFlight, float64(s.WritesInFlight))
	gauge(c.holding, float64(s.Holding))
	counter(c.held, s.Held)
	for t, n := range s.Received {
		counter(c.received, n, string(t))
	}
	for t, n := range s.DeliveredByType {
		counter(c.delivered, n, string(t))
	}
	for f, n := range s.Filtered {
		counter(c.filtered, n, string(f))
	}
	for name, u := range s.Budgets {
		gauge(c.budgetUsed, float64(u.Used), name)
		gauge(c.budgetMax, float64(u.Max), name)
		gauge(c.budgetBytes, float64(u.UsedBytes), name)
	}
	counter(c.overBudget, s.OverBudget)
	ch <- prometheus.MustNewConstHistogram(c.syncDuration, s.SyncDuration.Count, s.SyncDuration.Sum, s.SyncDuration.Buckets)
	ch <- prometheus.MustNewConstHistogram(c.handlerLag, s.HandlerLag.Count, s.HandlerLag.Sum, s.HandlerLag.Buckets)
}

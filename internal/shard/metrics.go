// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a member's figures. A nil *Metrics records nothing.
type Metrics struct {
	members    prometheus.Gauge
	buckets    prometheus.Gauge
	rebalances prometheus.Counter
	handoff    prometheus.Histogram
	prepared   prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg, when not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vidra_shard_members", Help: "Members in this replica's current view of the sharded operator.",
		}),
		buckets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vidra_shard_buckets", Help: "Buckets (of 256) this replica owns in its settled view; 0 while the view settles.",
		}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vidra_shard_rebalances_total", Help: "Changes of membership this replica took on.",
		}),
		handoff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "vidra_shard_handoff_seconds",
			Help:    "Time from a change of membership to the view it settled in: every member took it on, reconciles under the old one ended.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30},
		}),
		prepared: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vidra_shard_prepared_total",
			Help: "Times this replica listed ahead the objects of buckets it would take over from members late renewing their Leases.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.members, m.buckets, m.rebalances, m.handoff, m.prepared)
	}
	return m
}

func (m *Metrics) rebalanced(members int) {
	if m == nil {
		return
	}
	m.rebalances.Inc()
	m.members.Set(float64(members))
	m.buckets.Set(0)
}

func (m *Metrics) settled(took time.Duration, members, buckets int) {
	if m == nil {
		return
	}
	m.handoff.Observe(took.Seconds())
	m.members.Set(float64(members))
	m.buckets.Set(float64(buckets))
}

func (m *Metrics) observeOwned(members, buckets int) {
	if m == nil {
		return
	}
	m.members.Set(float64(members))
	m.buckets.Set(float64(buckets))
}

func (m *Metrics) preparedFor() {
	if m == nil {
		return
	}
	m.prepared.Inc()
}

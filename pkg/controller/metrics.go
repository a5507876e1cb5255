// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vidra-operator/vidra/internal/wakequeue"
)

// Trigger is what woke a reconcile (see wakequeue.Trigger).
type Trigger = wakequeue.Trigger

// Triggers, as wakequeue names them.
const (
	TriggerRequested  = wakequeue.TriggerRequested
	TriggerEvent      = wakequeue.TriggerEvent
	TriggerStartup    = wakequeue.TriggerStartup
	TriggerRetry      = wakequeue.TriggerRetry
	TriggerInterval   = wakequeue.TriggerInterval
	TriggerHealth     = wakequeue.TriggerHealth
	TriggerDependency = wakequeue.TriggerDependency
	TriggerRebalance  = wakequeue.TriggerRebalance
)

// Metrics are the controller's Prometheus metrics. Their values are what the
// tests read to count reconciles, so that nothing depends on log parsing.
type Metrics struct {
	Reconciles       *prometheus.CounterVec
	ReconcileSeconds *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg, when not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_reconciles_total",
			Help: "Reconciles of VidraResources, by result (success, error, conflict) and by what woke them.",
		}, []string{"result", "trigger"}),
		ReconcileSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vidra_reconcile_duration_seconds",
			Help:    "Duration of VidraResource reconciles, by result.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.Reconciles, m.ReconcileSeconds)
	}
	return m
}

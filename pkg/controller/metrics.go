// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Trigger is what woke a reconcile. It is recorded beside the work item, which
// stays a bare key.
type Trigger string

// Triggers, in the order of precedence used when several woke one reconcile.
const (
	TriggerRequested Trigger = "requested"
	TriggerEvent     Trigger = "event"
	TriggerStartup   Trigger = "startup"
	TriggerRetry     Trigger = "retry"
	TriggerInterval  Trigger = "interval"
	// TriggerHealth: a managed object's health changed, or a wait for
	// health timed out.
	TriggerHealth Trigger = "health"
	// TriggerDependency: a VidraResource this one depends on became Ready,
	// or stopped being Ready.
	TriggerDependency Trigger = "dependency"
	// TriggerRebalance: this replica of a sharded operator took on a new
	// share of the VidraResources.
	TriggerRebalance Trigger = "rebalance"
)

var triggerOrder = []Trigger{TriggerRequested, TriggerEvent, TriggerDependency, TriggerHealth, TriggerStartup, TriggerRebalance, TriggerRetry, TriggerInterval}

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

package controller

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// Trigger is what woke a reconcile. It is recorded beside the work item, which
// stays a bare key.
type Trigger string

// triggerKey carries the Trigger of a reconcile in its context, for the few
// places that act on why it runs (a requested reconcile checks that a remote
// destination answers).
type triggerKey struct{}

func withTrigger(ctx context.Context, t Trigger) context.Context {
	return context.WithValue(ctx, triggerKey{}, t)
}

// triggerOf returns the Trigger of the reconcile ctx belongs to, or "".
func triggerOf(ctx context.Context) Trigger {
	t, _ := ctx.Value(triggerKey{}).(Trigger)
	return t
}

// Triggers, in the order of precedence used when several woke one reconcile.
const (
	TriggerRequested Trigger = "requested"
	TriggerEvent     Trigger = "event"
	TriggerStartup   Trigger = "startup"
	TriggerRetry     Trigger = "retry"
	TriggerInterval  Trigger = "interval"
)

var triggerOrder = []Trigger{TriggerRequested, TriggerEvent, TriggerStartup, TriggerRetry, TriggerInterval}

// Metrics are the controller's Prometheus metrics. Their values are what the
// tests read to count reconciles, so that nothing depends on log parsing.
type Metrics struct {
	Reconciles       *prometheus.CounterVec
	ReconcileSeconds *prometheus.HistogramVec
	DriftCorrections *prometheus.CounterVec
	Applies          *prometheus.CounterVec
	Prunes           *prometheus.CounterVec
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
		DriftCorrections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_drift_corrections_total",
			Help: "Managed objects put back after they were changed or deleted by someone else, by kind.",
		}, []string{"kind"}),
		Applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_applies_total",
			Help: "Server-side apply requests, by result.",
		}, []string{"result"}),
		Prunes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_prunes_total",
			Help: "Managed objects deleted because they left the manifest or their VidraResource was deleted, by result.",
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.Reconciles, m.ReconcileSeconds, m.DriftCorrections, m.Applies, m.Prunes)
	}
	return m
}

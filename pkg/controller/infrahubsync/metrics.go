// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahubsync

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the controller's Prometheus metrics; their label values are
// Vidra's constants, never a tenant's names.
type Metrics struct {
	// Reconciles counts passes by what woke them.
	Reconciles *prometheus.CounterVec
	// Downloads counts artifact contents downloaded, by result.
	Downloads *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg, when not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_infrahubsync_reconciles_total",
			Help: "Passes of InfrahubSyncs, by what woke them (requested, event, child, startup, retry, interval).",
		}, []string{"trigger"}),
		Downloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_infrahubsync_downloads_total",
			Help: "Artifact contents downloaded from Infrahub, by result (applied, refused, error).",
		}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.Reconciles, m.Downloads)
	}
	return m
}

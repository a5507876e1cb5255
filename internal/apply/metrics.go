// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import "github.com/prometheus/client_golang/prometheus"

// metrics are the engine's Prometheus metrics: what it wrote, and why.
type metrics struct {
	DriftCorrections *prometheus.CounterVec
	DriftDetected    *prometheus.CounterVec
	Applies          *prometheus.CounterVec
	Prunes           *prometheus.CounterVec
}

// newMetrics creates the metrics and registers them with reg, when not nil.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		DriftCorrections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_drift_corrections_total",
			Help: "Managed objects put back after they were changed or deleted by someone else, by kind (at most 64 kinds; later ones are \"other\").",
		}, []string{"kind"}),
		DriftDetected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vidra_drift_detected_total",
			Help: "Changes of managed objects by someone else that Vidra found, corrected or (driftPolicy Report) reported, by kind (at most 64) and by the field manager that made them (at most 32 names, each cut to 128 bytes; later ones, and kinds over 128 bytes, are \"other\").",
		}, []string{"kind", "manager"}),
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
		reg.MustRegister(m.DriftCorrections, m.DriftDetected, m.Applies, m.Prunes)
	}
	return m
}

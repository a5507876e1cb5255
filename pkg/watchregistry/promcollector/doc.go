// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package promcollector reports a watchregistry.Registry's Stats to
// Prometheus: informers by state, owners, cached objects, events received,
// delivered and filtered by reason, budgets, and the histograms of sync
// duration and handler lag.
//
//	metrics.MustRegister(promcollector.New(reg, "my_operator_watchregistry"))
//
// It is a Go module of its own so that the registry's module depends on
// client-go and apimachinery only: an operator that does not export
// Prometheus metrics has no Prometheus in its module graph.
package promcollector

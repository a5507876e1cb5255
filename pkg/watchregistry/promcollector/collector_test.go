// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package promcollector_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
	"github.com/vidra-operator/vidra/pkg/watchregistry/promcollector"
)

type stats watchregistry.Stats

func (s stats) Stats() watchregistry.Stats { return watchregistry.Stats(s) }

func TestCollectorReportsTheStats(t *testing.T) {
	src := stats{
		Informers:       map[watchregistry.State]int{watchregistry.StateSynced: 2, watchregistry.StateForbidden: 0},
		Running:         2,
		Started:         3,
		Owners:          1,
		CachedObjects:   7,
		Received:        map[watchregistry.EventType]uint64{watchregistry.EventAdded: 4},
		DeliveredByType: map[watchregistry.EventType]uint64{watchregistry.EventInitialList: 1},
		Filtered:        map[watchregistry.FilterReason]uint64{watchregistry.FilterResync: 5},
		Budgets:         map[string]watchregistry.BudgetUse{"team-a": {Used: 3, Max: 10}},
		SyncDuration:    watchregistry.Histogram{Buckets: map[float64]uint64{0.005: 0, 0.01: 2}, Count: 2, Sum: 0.015},
		HandlerLag:      watchregistry.Histogram{Buckets: map[float64]uint64{0.001: 1}, Count: 1, Sum: 0.0002},
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(promcollector.New(src, "wrtest")); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, l := range m.GetLabel() {
				name += fmt.Sprintf("{%s=%s}", l.GetName(), l.GetValue())
			}
			switch {
			case m.GetGauge() != nil:
				got[name] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				got[name] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				got[name+"_count"] = float64(m.GetHistogram().GetSampleCount())
				got[name+"_sum"] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	want := map[string]float64{
		"wrtest_informers{state=Synced}":                  2,
		"wrtest_informers{state=Forbidden}":               0,
		"wrtest_informers_running":                        2,
		"wrtest_informers_started_total":                  3,
		"wrtest_owners":                                   1,
		"wrtest_cached_objects":                           7,
		"wrtest_expectations":                             0,
		"wrtest_writes_in_flight":                         0,
		"wrtest_events_holding":                           0,
		"wrtest_events_held_total":                        0,
		"wrtest_events_received_total{type=Added}":        4,
		"wrtest_events_delivered_total{type=InitialList}": 1,
		"wrtest_events_filtered_total{reason=resync}":     5,
		"wrtest_budget_objects{budget=team-a}":            3,
		"wrtest_budget_max_objects{budget=team-a}":        10,
		"wrtest_budget_bytes{budget=team-a}":              0,
		"wrtest_over_budget_total":                        0,
		"wrtest_informer_sync_duration_seconds_count":     2,
		"wrtest_informer_sync_duration_seconds_sum":       0.015,
		"wrtest_handler_lag_seconds_count":                1,
		"wrtest_handler_lag_seconds_sum":                  0.0002,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("metrics (-want +got):\n%s", diff)
	}
}

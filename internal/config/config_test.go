// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParse(t *testing.T) {
	prev := &Config{RequeueAfter: time.Minute, EventBased: false, Jitter: 0.5, OverrideManagers: []string{"kubectl"}, RequeueSyncAfter: 2 * time.Minute, QueryName: "Prev"}
	tests := []struct {
		name         string
		data         map[string]string
		want         *Config
		wantProblems []string
	}{
		{name: "missing keys mean defaults", data: nil, want: Default()},
		{
			name: "every key",
			data: map[string]string{"requeueResourcesAfter": "30s", "eventBasedReconcile": "false", "requeueJitter": "25%", "overrideManagers": " a, b ,,c"},
			want: &Config{RequeueAfter: 30 * time.Second, EventBased: false, Jitter: 0.25, OverrideManagers: []string{"a", "b", "c"}, RequeueSyncAfter: time.Minute, QueryName: DefaultQueryName},
		},
		{
			name: "zero turns the interval off and a fraction is a jitter",
			data: map[string]string{"requeueResourcesAfter": "0", "requeueJitter": "0.2"},
			want: &Config{RequeueAfter: 0, EventBased: true, Jitter: 0.2, OverrideManagers: DefaultOverrideManagers, RequeueSyncAfter: time.Minute, QueryName: DefaultQueryName},
		},
		{
			name:         "bad values keep the previous settings",
			data:         map[string]string{"requeueResourcesAfter": "soon", "eventBasedReconcile": "yes please", "requeueJitter": "150%"},
			want:         &Config{RequeueAfter: time.Minute, EventBased: false, Jitter: 0.5, OverrideManagers: DefaultOverrideManagers, RequeueSyncAfter: time.Minute, QueryName: DefaultQueryName},
			wantProblems: []string{"eventBasedReconcile", "requeueJitter", "requeueResourcesAfter"},
		},
		{
			name:         "a jitter that is not a number is refused: it would turn every re-check off",
			data:         map[string]string{"requeueJitter": "NaN%"},
			want:         &Config{RequeueAfter: Default().RequeueAfter, EventBased: true, Jitter: 0.5, OverrideManagers: DefaultOverrideManagers, RequeueSyncAfter: time.Minute, QueryName: DefaultQueryName},
			wantProblems: []string{"requeueJitter"},
		},
		{
			name:         "negative interval is refused",
			data:         map[string]string{"requeueResourcesAfter": "-5m"},
			want:         &Config{RequeueAfter: time.Minute, EventBased: true, Jitter: 0.1, OverrideManagers: DefaultOverrideManagers, RequeueSyncAfter: time.Minute, QueryName: DefaultQueryName},
			wantProblems: []string{"requeueResourcesAfter"},
		},
		{
			name:         "an interval under a second is refused: it would be a reconcile loop",
			data:         map[string]string{"requeueResourcesAfter": "1ns"},
			want:         &Config{RequeueAfter: time.Minute, EventBased: true, Jitter: 0.1, OverrideManagers: DefaultOverrideManagers, RequeueSyncAfter: time.Minute, QueryName: DefaultQueryName},
			wantProblems: []string{"requeueResourcesAfter"},
		},
		{
			name: "an empty list of managers is none",
			data: map[string]string{"overrideManagers": " "},
			want: &Config{RequeueAfter: Default().RequeueAfter, EventBased: true, Jitter: 0.1, RequeueSyncAfter: time.Minute, QueryName: DefaultQueryName},
		},
		{
			name:         "commas that name no manager keep the previous list",
			data:         map[string]string{"overrideManagers": " , ,"},
			want:         &Config{RequeueAfter: Default().RequeueAfter, EventBased: true, Jitter: 0.1, OverrideManagers: []string{"kubectl"}, RequeueSyncAfter: time.Minute, QueryName: DefaultQueryName},
			wantProblems: []string{"overrideManagers"},
		},
		{
			name: "the earlier operator's keys set the defaults of InfrahubSyncs",
			data: map[string]string{"requeueSyncAfter": "30s", "queryName": "MyArtifacts", "typo": "1"},
			want: func() *Config {
				c := Default()
				c.RequeueSyncAfter, c.QueryName = 30*time.Second, "MyArtifacts"
				return c
			}(),
			wantProblems: []string{"typo"},
		},
		{
			name:         "a sync interval of 0 or a query name with a space keeps the previous settings",
			data:         map[string]string{"requeueSyncAfter": "0", "queryName": "my query"},
			want:         func() *Config { c := Default(); c.RequeueSyncAfter, c.QueryName = 2*time.Minute, "Prev"; return c }(),
			wantProblems: []string{"queryName", "requeueSyncAfter"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := Parse(tt.data, prev)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			var keys []string
			for _, p := range problems {
				keys = append(keys, p.Key)
			}
			if diff := cmp.Diff(tt.wantProblems, keys); diff != "" {
				t.Errorf("problems (-want +got):\n%s\n%v", diff, problems)
			}
		})
	}
}

func TestJittered(t *testing.T) {
	if got := Jittered(10*time.Second, 0.1, func() float64 { return 1 }); got != 11*time.Second {
		t.Errorf("full jitter = %v, want 11s", got)
	}
	if got := Jittered(0, 0.1, func() float64 { return 1 }); got != 0 {
		t.Errorf("jitter of an interval that is off = %v, want 0", got)
	}
}

// A re-check is never turned off by its jitter: neither by a jitter that is
// not a number nor by an interval so long that the jittered one overflows.
func TestJitteredNeverTurnsARecheckOff(t *testing.T) {
	one := func() float64 { return 1 }
	for _, tc := range []struct {
		d      time.Duration
		jitter float64
		want   time.Duration
	}{
		{time.Minute, 0.1, time.Minute + 6*time.Second},
		{time.Minute, math.NaN(), time.Minute},
		{2_400_000 * time.Hour, 0.1, math.MaxInt64},
		{math.MaxInt64, 1, math.MaxInt64},
		{0, 0.1, 0},
	} {
		if got := Jittered(tc.d, tc.jitter, one); got != tc.want {
			t.Errorf("Jittered(%s, %v) = %s, want %s", tc.d, tc.jitter, got, tc.want)
		}
	}
}

func TestIntervalAndEventsOfAResource(t *testing.T) {
	cfg := Default()
	cfg.RequeueAfter, cfg.EventBased = 10*time.Minute, true
	for _, tc := range []struct {
		name string
		spec *metav1.Duration
		want time.Duration
	}{
		{"unset: the configured default", nil, 10 * time.Minute},
		{"set", &metav1.Duration{Duration: time.Hour}, time.Hour},
		{"0 turns it off", &metav1.Duration{}, 0},
		{"shorter than the minimum: the minimum", &metav1.Duration{Duration: time.Millisecond}, MinInterval},
	} {
		if got := cfg.Interval(tc.spec); got != tc.want {
			t.Errorf("%s: Interval = %v, want %v", tc.name, got, tc.want)
		}
	}
	off := false
	if !cfg.EventsOn(nil) || cfg.EventsOn(&off) {
		t.Errorf("EventsOn(nil) = %v, EventsOn(false) = %v; want the default (true), then false", cfg.EventsOn(nil), cfg.EventsOn(&off))
	}
}

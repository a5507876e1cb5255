// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import "testing"

func TestTenantFitsLetsNoTenantGrowPastItsBound(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		limit, before, after int
		want                 bool
	}{
		{"no bound", 0, 100, 5000, true},
		{"within", 64, 10, 64, true},
		{"one past", 64, 64, 65, false},
		{"growing from under to past", 64, 10, 65, false},
		{"shrinking while past", 64, 80, 70, true},
		{"the same set while past", 64, 80, 80, true},
		{"growing while past", 64, 80, 81, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tenantFits(tc.limit, tc.before, tc.after); got != tc.want {
				t.Errorf("tenantFits(%d, %d, %d) = %v, want %v", tc.limit, tc.before, tc.after, got, tc.want)
			}
		})
	}
}

func TestRoomStopsLingeringInformersBeforeRefusing(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		limit, running, lingering, n int
		wantStop                     int
		wantOK                       bool
	}{
		{"no bound", 0, 5000, 0, 100, 0, true},
		{"nothing to start", 2, 5, 0, 0, 0, true},
		{"within", 256, 200, 10, 56, 0, true},
		{"one past, one lingering", 256, 256, 1, 1, 1, true},
		{"past by more than linger", 256, 250, 3, 10, 0, false},
		{"past by exactly what lingers", 256, 250, 4, 10, 4, true},
		{"past with none lingering", 4, 4, 0, 1, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop, ok := room(tc.limit, tc.running, tc.lingering, tc.n)
			if stop != tc.wantStop || ok != tc.wantOK {
				t.Errorf("room(%d, %d, %d, %d) = %d, %v; want %d, %v", tc.limit, tc.running, tc.lingering, tc.n, stop, ok, tc.wantStop, tc.wantOK)
			}
		})
	}
}

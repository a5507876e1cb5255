// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"math"
	"strings"
	"testing"
)

func TestParseMetricsReadsLabelsAndValues(t *testing.T) {
	const text = `# HELP vidra_reconciles_total Reconciles.
# TYPE vidra_reconciles_total counter
vidra_reconciles_total{result="success",trigger="event"} 12
vidra_reconciles_total{result="error",trigger="retry"} 3
vidra_reconciles_total{result="success",trigger="startup"} 200
go_memstats_heap_alloc_bytes 1.2345e+07
odd{msg="a \"quoted\", {braced} value",x="y"} +Inf
`
	m, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"vidra_reconciles_total", nil, 215},
		{"vidra_reconciles_total", map[string]string{"result": "success"}, 212},
		{"vidra_reconciles_total", map[string]string{"trigger": "retry"}, 3},
		{"go_memstats_heap_alloc_bytes", nil, 12345000},
		{"absent_total", nil, 0},
	}
	for _, tt := range tests {
		if got := m.Sum(tt.name, tt.match); got != tt.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", tt.name, tt.match, got, tt.want)
		}
	}
	odd := m["odd"]
	if len(odd) != 1 || odd[0].Labels["msg"] != `a "quoted", {braced} value` || odd[0].Labels["x"] != "y" || !math.IsInf(odd[0].Value, 1) {
		t.Errorf("odd = %+v", odd)
	}
}

func TestParseMetricsRefusesMalformedLines(t *testing.T) {
	for _, line := range []string{"novalue", `x{a="b" 1`, `x{a=b} 1`, "x one"} {
		if _, err := ParseMetrics(strings.NewReader(line + "\n")); err == nil {
			t.Errorf("%q parsed without error", line)
		}
	}
}

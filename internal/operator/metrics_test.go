// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Tenants name the servers of remote destinations, as many as they like,
// and their servers answer with any status code: requests to them share the
// host label "remote" and count by the class of their code, so that they add
// no series; the operator's own API server keeps its host and codes.
func TestRequestMetricsOfRemoteServersShareOneHost(t *testing.T) {
	m := newClientMetrics("10.0.0.1:6443")
	ctx := context.Background()
	for i := range 50 {
		host := fmt.Sprintf("cluster-%d.tenant.example:443", i)
		m.Observe(ctx, "GET", url.URL{Host: host}, time.Millisecond)
		rateLimiterMetric{m}.Observe(ctx, "GET", url.URL{Host: host}, time.Millisecond)
		m.Increment(ctx, fmt.Sprint(200+i), "GET", host)
	}
	m.Increment(ctx, "200", "GET", "10.0.0.1:6443")
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.latency, m.rateLimiter, m.results)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"rest_client_requests_total":                2,
		"rest_client_request_duration_seconds":      1,
		"rest_client_rate_limiter_duration_seconds": 1,
	}
	for _, f := range families {
		if n := len(f.GetMetric()); n != want[f.GetName()] {
			t.Errorf("requests to 50 remote servers and the local one made %d series of %s, want %d", n, f.GetName(), want[f.GetName()])
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "host" && l.GetValue() != "remote" && l.GetValue() != "10.0.0.1:6443" {
					t.Errorf("%s has host %q", f.GetName(), l.GetValue())
				}
				if l.GetName() == "code" && l.GetValue() != "2xx" && l.GetValue() != "200" {
					t.Errorf("%s has code %q", f.GetName(), l.GetValue())
				}
			}
		}
	}
}

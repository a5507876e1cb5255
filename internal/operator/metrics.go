// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"
)

// queueMetrics publishes client-go's work queue metrics to Prometheus. It is
// handed to the queue through its config, not installed globally.
type queueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
}

func newQueueMetrics(reg prometheus.Registerer) *queueMetrics {
	buckets := prometheus.ExponentialBuckets(0.0001, 4, 10)
	m := &queueMetrics{
		depth:        prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "Current depth of the work queue."}, []string{"name"}),
		adds:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_adds_total", Help: "Items added to the work queue."}, []string{"name"}),
		latency:      prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_queue_duration_seconds", Help: "Time an item waits in the queue before it is processed.", Buckets: buckets}, []string{"name"}),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workqueue_work_duration_seconds", Help: "Time processing an item takes.", Buckets: buckets}, []string{"name"}),
		unfinished:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_unfinished_work_seconds", Help: "Seconds of work in progress not yet observed by work_duration."}, []string{"name"}),
		longest:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_longest_running_processor_seconds", Help: "Seconds the longest running item has been processed."}, []string{"name"}),
		retries:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workqueue_retries_total", Help: "Rate-limited re-adds of items."}, []string{"name"}),
	}
	if reg != nil {
		reg.MustRegister(m.depth, m.adds, m.latency, m.workDuration, m.unfinished, m.longest, m.retries)
	}
	return m
}

func (m *queueMetrics) NewDepthMetric(n string) workqueue.GaugeMetric {
	return m.depth.WithLabelValues(n)
}
func (m *queueMetrics) NewAddsMetric(n string) workqueue.CounterMetric {
	return m.adds.WithLabelValues(n)
}
func (m *queueMetrics) NewLatencyMetric(n string) workqueue.HistogramMetric {
	return m.latency.WithLabelValues(n)
}
func (m *queueMetrics) NewWorkDurationMetric(n string) workqueue.HistogramMetric {
	return m.workDuration.WithLabelValues(n)
}
func (m *queueMetrics) NewUnfinishedWorkSecondsMetric(n string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(n)
}
func (m *queueMetrics) NewLongestRunningProcessorSecondsMetric(n string) workqueue.SettableGaugeMetric {
	return m.longest.WithLabelValues(n)
}
func (m *queueMetrics) NewRetriesMetric(n string) workqueue.CounterMetric {
	return m.retries.WithLabelValues(n)
}

// clientMetrics adapts client-go's request metrics hooks to Prometheus.
type clientMetrics struct {
	latency     *prometheus.HistogramVec
	rateLimiter *prometheus.HistogramVec
	results     *prometheus.CounterVec
	hosts       hostLabel
}

// hostLabel is the host label of request metrics: the operator's own API
// server by its host, every other server as "remote". Tenants name the
// servers of remote destinations, any number of them, and a host that
// does not even resolve is still a request; labelled by host, each would
// add series to every request metric, for good.
type hostLabel string

func (h hostLabel) of(host string) string {
	if host == string(h) {
		return host
	}
	return "remote"
}

func (m *clientMetrics) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	m.latency.WithLabelValues(verb, m.hosts.of(u.Host)).Observe(d.Seconds())
}

type rateLimiterMetric struct{ m *clientMetrics }

func (r rateLimiterMetric) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	r.m.rateLimiter.WithLabelValues(verb, r.m.hosts.of(u.Host)).Observe(d.Seconds())
}

func (m *clientMetrics) Increment(_ context.Context, code, method, host string) {
	h := m.hosts.of(host)
	if h == "remote" {
		code = codeClass(code)
	}
	m.results.WithLabelValues(code, method, h).Inc()
}

// codeClass is the class of an HTTP status code ("2xx" for "201"), and
// keeps client-go's "<error>": a tenant's server may answer with any three
// digits, and every code would be series of its own.
func codeClass(code string) string {
	switch {
	case code == "<error>":
		return code
	case len(code) == 3 && code[0] >= '1' && code[0] <= '5':
		return code[:1] + "xx"
	}
	return "other"
}

var registerClientMetrics sync.Once

// RegisterClientMetrics publishes client-go's request latency, rate-limiter
// wait and request results to reg, the requests to the API server at
// localHost (host and port, as in its URL) by host, those to any other
// server as host "remote". client-go offers one process-wide hook for
// these, so only the first call in a process takes effect; the binary calls
// it once from main.
func RegisterClientMetrics(reg prometheus.Registerer, localHost string) {
	registerClientMetrics.Do(func() {
		m := newClientMetrics(localHost)
		reg.MustRegister(m.latency, m.rateLimiter, m.results)
		metrics.Register(metrics.RegisterOpts{
			RequestLatency:     m,
			RateLimiterLatency: rateLimiterMetric{m},
			RequestResult:      m,
		})
	})
}

func newClientMetrics(localHost string) *clientMetrics {
	buckets := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	return &clientMetrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rest_client_request_duration_seconds",
			Help: "Latency of requests to API servers, by verb and host (\"remote\" for every server but the operator's own).", Buckets: buckets}, []string{"verb", "host"}),
		rateLimiter: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rest_client_rate_limiter_duration_seconds",
			Help: "Time requests waited for the client-side rate limiter, by verb and host (\"remote\" for every server but the operator's own).", Buckets: buckets}, []string{"verb", "host"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rest_client_requests_total",
			Help: "Requests to API servers, by status code, method and host (\"remote\" for every server but the operator's own, whose codes count by class: \"2xx\")."}, []string{"code", "method", "host"}),
		hosts: hostLabel(localHost),
	}
}

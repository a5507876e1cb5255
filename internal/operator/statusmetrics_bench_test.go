// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// fleet is n VidraResources, one a namespace (the bench's 1,000), each
// with the four conditions the collector reports: those of a converged
// resource, or with failing, those of one whose apply fails.
func fleet(n int, failing bool) []*v1alpha1.VidraResource {
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ready, problem := metav1.ConditionTrue, metav1.ConditionFalse
	if failing {
		ready, problem = metav1.ConditionFalse, metav1.ConditionTrue
	}
	out := make([]*v1alpha1.VidraResource, n)
	for i := range out {
		out[i] = &v1alpha1.VidraResource{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("bench-%04d", i), Name: "r", CreationTimestamp: at},
			Status: v1alpha1.VidraResourceStatus{Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionReady, Status: ready, Reason: v1alpha1.ReasonReconciled, LastTransitionTime: at},
				{Type: v1alpha1.ConditionStalled, Status: problem, Reason: v1alpha1.ReasonReconciled, LastTransitionTime: at},
				{Type: v1alpha1.ConditionConflict, Status: problem, Reason: v1alpha1.ReasonNoConflict, LastTransitionTime: at},
				{Type: v1alpha1.ConditionDrifted, Status: problem, Reason: v1alpha1.ReasonNoDrift, LastTransitionTime: at},
			}},
		}
	}
	return out
}

// BenchmarkScrapeStatus is one scrape of /metrics carrying the status
// collector over 1,000 namespaces, every resource converged or every one
// failing (the most series), as Prometheus (gzip) and a plain client ask
// it: B/op is the garbage a scrape leaves (the body's buffer included).
func BenchmarkScrapeStatus(b *testing.B) {
	for _, failing := range []bool{false, true} {
		resources := fleet(1000, failing)
		c := newStatusCollector(nil, nil, nil)
		c.resources = func() []*v1alpha1.VidraResource { return resources }
		reg := prometheus.NewRegistry()
		reg.MustRegister(c)
		h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		for _, enc := range []string{"gzip", "identity"} {
			b.Run(fmt.Sprintf("failing=%v/%s", failing, enc), func(b *testing.B) {
				scrape(b, h, enc)
			})
		}
	}
}

// scrape serves h's /metrics b.N times, asking for enc.
func scrape(b *testing.B, h http.Handler, enc string) {
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept-Encoding", enc)
	var size int
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size), "body-bytes")
}

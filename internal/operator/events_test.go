// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

// One namespace's burst of Events takes its own bucket, not the others'.
func TestEventsOfOneNamespaceCannotCrowdOutAnothers(t *testing.T) {
	sink := record.NewFakeRecorder(1000)
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	f := newFairRecorder(sink, clk, prometheus.NewRegistry())
	obj := func(ns string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}
	}

	for range namespaceEventBurst + 100 {
		f.Eventf(obj("noisy"), corev1.EventTypeWarning, "Failed", "%s", "again")
	}
	f.Event(obj("quiet"), corev1.EventTypeNormal, "Applied", "once")
	if got, want := len(sink.Events), namespaceEventBurst+1; got != want {
		t.Fatalf("%d Events recorded, want %d: the noisy namespace's burst and the quiet one's", got, want)
	}
	var m dto.Metric
	if err := f.dropped.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 100 {
		t.Errorf("dropped %v, want 100", got)
	}
	clk.Step(time.Second)
	for range namespaceEventRate + 5 {
		f.AnnotatedEventf(obj("noisy"), nil, corev1.EventTypeWarning, "Failed", "%s", "later")
	}
	if got, want := len(sink.Events), namespaceEventBurst+1+namespaceEventRate; got != want {
		t.Errorf("%d Events recorded after a second, want %d", got, want)
	}
}

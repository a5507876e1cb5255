// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/internal/nsbucket"
)

// Events of one namespace's resources, per second and in a burst: as many
// as that namespace's retries (the work queue's bucket per namespace).
const (
	namespaceEventRate  = 20
	namespaceEventBurst = 200
)

// fairRecorder passes on the Events of each namespace's resources within a
// token bucket of that namespace's own, and drops the rest. Every Event
// goes through one broadcaster whose queue (1,000 Events) drops what does
// not fit: one tenant whose resources all changed at once, or failed
// together, would otherwise have the Events of every other tenant dropped.
// client-go's own spam filter counts per object, which a tenant with many
// objects does not reach. The status, not the Events, is what a resource
// reports, so dropping Events loses nothing a reconcile relies on.
type fairRecorder struct {
	record.EventRecorder
	clock   clock.PassiveClock
	buckets *nsbucket.Buckets
	dropped prometheus.Counter
}

func newFairRecorder(r record.EventRecorder, clk clock.PassiveClock, reg prometheus.Registerer) *fairRecorder {
	f := &fairRecorder{EventRecorder: r, clock: clk, buckets: nsbucket.New(namespaceEventRate, namespaceEventBurst),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vidra_events_dropped_total",
			Help: "Events not recorded because their namespace's resources had recorded too many at once (20 per second, in bursts of 200).",
		})}
	if reg != nil {
		reg.MustRegister(f.dropped)
	}
	return f
}

// allow takes a token of obj's namespace, if one is left.
func (f *fairRecorder) allow(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return true
	}
	if f.buckets.Allow(m.GetNamespace(), f.clock.Now()) {
		return true
	}
	f.dropped.Inc()
	return false
}

func (f *fairRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	if f.allow(obj) {
		f.EventRecorder.Event(obj, eventtype, reason, message)
	}
}

func (f *fairRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if f.allow(obj) {
		f.EventRecorder.Eventf(obj, eventtype, reason, messageFmt, args...)
	}
}

func (f *fairRecorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if f.allow(obj) {
		f.EventRecorder.AnnotatedEventf(obj, annotations, eventtype, reason, messageFmt, args...)
	}
}

var _ record.EventRecorder = (*fairRecorder)(nil)

package operator

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
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
	dropped prometheus.Counter

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
	calls    int
}

func newFairRecorder(r record.EventRecorder, clk clock.PassiveClock, reg prometheus.Registerer) *fairRecorder {
	f := &fairRecorder{EventRecorder: r, clock: clk, limiters: map[string]*rate.Limiter{},
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
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls%1024 == 0 {
		// A full bucket is a new one: drop those, so that namespaces come
		// and go without their buckets piling up.
		for ns, lim := range f.limiters {
			if lim.TokensAt(now) >= namespaceEventBurst {
				delete(f.limiters, ns)
			}
		}
	}
	lim := f.limiters[m.GetNamespace()]
	if lim == nil {
		lim = rate.NewLimiter(namespaceEventRate, namespaceEventBurst)
		f.limiters[m.GetNamespace()] = lim
	}
	if lim.AllowN(now, 1) {
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

package operator

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"k8s.io/klog/v2"
)

// TuneMemory keeps a soft memory limit (debug.SetMemoryLimit) of
// max(floor, the runtime's memory outside the heap + 1.25 × the live heap),
// revised every interval, until ctx ends.
//
// Why: with the default GOGC=100 the heap may grow to twice the live data
// before a collection, and the pages freed go back to the kernel slowly, so
// the process's RSS sits far above what it uses (the bench measured 130 MiB
// of RSS for 45 MiB of heap with 4,000 managed objects). A soft limit makes
// the runtime collect and return memory sooner. The limit counts all the
// memory the runtime holds, not just the heap, so it must leave room for
// stacks and runtime structures too: a limit at or below what the runtime
// already holds makes the collector run without pause (the bench saw 87% of
// the operator's CPU in GC with a limit of 1.5 × the live heap alone).
// Following the live heap keeps a quarter of it as headroom, like GOGC=25,
// however large an installation grows.
//
// A GOMEMLIMIT set in the environment (for example from the container's
// memory limit) wins: then nothing is tuned. floor 0 turns tuning off.
func TuneMemory(ctx context.Context, floor int64, interval time.Duration) {
	if floor <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	samples := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	set := func() {
		metrics.Read(samples)
		v := make([]uint64, len(samples))
		for i, s := range samples {
			if s.Value.Kind() != metrics.KindUint64 {
				return
			}
			v[i] = s.Value.Uint64()
		}
		live, total, released, objects, unused, free := v[0], v[1], v[2], v[3], v[4], v[5]
		heap := objects + unused + free + released
		var other uint64
		if total > heap {
			other = total - heap
		}
		want := other + live + live/4
		limit := floor
		if want < math.MaxInt64/2 {
			limit = max(floor, int64(want))
		}
		if prev := debug.SetMemoryLimit(limit); prev != limit {
			klog.FromContext(ctx).V(4).Info("Soft memory limit", "bytes", limit, "liveHeap", live, "outsideHeap", other)
		}
	}
	set()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			set()
		}
	}
}

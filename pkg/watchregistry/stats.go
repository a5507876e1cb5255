// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"sync/atomic"
)

// Stats is a snapshot of the registry's figures, the same that package
// promcollector reports to Prometheus.
type Stats struct {
	// Informers counts the informers by state: running and lingering ones,
	// and failed ones that owners still track. Every state is present.
	Informers map[State]int
	// Running counts informers whose goroutines have not exited yet,
	// including stopped ones still winding down.
	Running int
	// Started counts informers started since New.
	Started uint64
	// Owners counts owners that track at least one ref.
	Owners int
	// CachedObjects counts the objects held by all caches, kept as the
	// informers deliver them rather than counted at each call.
	CachedObjects int
	// Expectations counts pending ExpectWrite and ExpectDelete expectations
	// (Write.Done makes one).
	Expectations int
	// WritesInFlight counts the writes declared with BeginWrite that have
	// not ended, nor outlasted Options.WriteHold.
	WritesInFlight int
	// Holding counts the events held now for writes in flight.
	Holding int
	// Held counts the events held for a write in flight since New; each is
	// counted in Received once, and in Delivered or Filtered once released.
	Held uint64
	// Received counts the events the informers produced, by type;
	// EventInitialList counts listed objects, EventStateChanged counts state
	// changes. A digest change is received as an EventUpdated.
	Received map[EventType]uint64
	// Delivered counts Enqueue calls.
	Delivered uint64
	// DeliveredByType counts Enqueue calls by event type: its
	// EventDigestChanged entry counts the owners woken by a change of
	// Options.WakeDigest (a health transition, say).
	DeliveredByType map[EventType]uint64
	// Filtered counts events not delivered, by reason.
	Filtered map[FilterReason]uint64
	// Budgets reports the named Budgets of the registered clusters, by
	// name: the objects their caches hold, and the most they may.
	Budgets map[string]BudgetUse
	// OverBudget counts the times a cluster's caches went over its Budget,
	// each of which put the cluster on hold and stopped its informers
	// (unless its clients changed first, which stopped them anyway).
	OverBudget uint64
	// SyncDuration is the time from each informer's start to the end of
	// its initial list.
	SyncDuration Histogram
	// HandlerLag is the time from the reflector's receipt of each
	// delivered event to its first Enqueue: what the registry adds, Map
	// included.
	HandlerLag Histogram
}

type counters struct {
	started    atomic.Uint64
	running    atomic.Int64
	held       atomic.Uint64
	overBudget atomic.Uint64
	delivered  [len(eventTypes)]atomic.Uint64
	received   [len(eventTypes)]atomic.Uint64
	filtered   [len(filterReasons)]atomic.Uint64
}

func eventTypeIndex(t EventType) int {
	for i, x := range eventTypes {
		if x == t {
			return i
		}
	}
	panic("watchregistry: unknown event type " + string(t))
}

func filterIndex(f FilterReason) int {
	for i, x := range filterReasons {
		if x == f {
			return i
		}
	}
	panic("watchregistry: unknown filter reason " + string(f))
}

// Stats returns a snapshot of the registry's figures.
func (r *Registry[K]) Stats() Stats {
	s := Stats{
		Informers:       make(map[State]int, len(states)),
		Received:        make(map[EventType]uint64, len(receivedTypes)),
		DeliveredByType: make(map[EventType]uint64, len(eventTypes)),
		Filtered:        make(map[FilterReason]uint64, len(filterReasons)),
		Budgets:         map[string]BudgetUse{},
	}
	for _, st := range states {
		s.Informers[st] = 0
	}
	r.mu.Lock()
	for _, c := range r.clusters {
		if b := c.budget; b != nil && b.Name() != "" {
			s.Budgets[b.Name()] = BudgetUse{Used: b.Used(), Max: b.Max(), UsedBytes: b.UsedBytes(), MaxBytes: b.MaxBytes()}
		}
	}
	for _, e := range r.entries {
		s.Informers[e.state]++
		if e.state == StateSynced || e.state == StatePending {
			s.CachedObjects += int(e.objects.Load())
		}
	}
	s.Owners = len(r.owners)
	r.mu.Unlock()
	s.Running = int(r.stats.running.Load())
	s.Started = r.stats.started.Load()
	s.Expectations = r.exp.len()
	s.WritesInFlight, s.Holding = r.exp.inflightAndHeld()
	s.Held = r.stats.held.Load()
	s.OverBudget = r.stats.overBudget.Load()
	for i, t := range eventTypes {
		n := r.stats.delivered[i].Load()
		s.DeliveredByType[t] = n
		s.Delivered += n
	}
	for _, t := range receivedTypes {
		s.Received[t] = r.stats.received[eventTypeIndex(t)].Load()
	}
	for i, f := range filterReasons {
		s.Filtered[f] = r.stats.filtered[i].Load()
	}
	s.SyncDuration, s.HandlerLag = r.metrics.syncDuration.snapshot(), r.metrics.handlerLag.snapshot()
	return s
}

// metrics holds the histograms Stats reports besides its counters.
type metrics struct {
	// syncDuration observes, per informer, the time from its start to the
	// end of its initial list.
	syncDuration *histogram
	// handlerLag observes, per delivered event, the time from the
	// reflector's receipt of the event to the first Enqueue: the queueing
	// and filtering the registry adds, Map included.
	handlerLag *histogram
}

func newMetrics() metrics {
	return metrics{
		syncDuration: newHistogram(0.005, 2, 15),   // 5ms to about 80s
		handlerLag:   newHistogram(0.00005, 2, 16), // 50µs to about 1.6s
	}
}

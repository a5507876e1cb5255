// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
)

// SetLabelSelector changes the label selector of every informer, as
// Options.LabelSelector set it: SetLabelSelectors with one selector.
func (r *Registry[K]) SetLabelSelector(selector string) error {
	return r.SetLabelSelectors(selector)
}

// SetLabelSelectors scopes the informers to the objects that any of
// selectors selects, with one informer per selector and ref; they should
// select disjoint sets of objects, or an object two of them select has its
// events delivered twice. Setting the current selectors changes nothing.
//
// Adding selectors to the current ones and removing none widens the scope
// without a restart: the informers running keep their caches and go on
// delivering events, and each ref gets an informer of every added selector.
// Until those have listed, the ref is Pending again (reads fail with
// ErrNotSynced, WaitForSync waits); then its owners, and the owners of the
// objects listed, receive EventInitialList, as after a first list. A replica
// of a sharded operator that gains buckets lists only theirs, that way. An
// added selector that was prepared (see Prepare) brings its informers along
// instead: those that have listed join at once, and the ref stays Synced
// (unless it was Pending already, or another selector added with it is
// still listing); the owners of the objects they saw receive
// EventInitialList once the ref is synced.
//
// Any other change restarts every informer: the informers running stop,
// their refs turn StateStopped and their owners receive EventStateChanged,
// so that they Track again and get informers of the new scope (a replica
// whose share of the objects shrank, for one).
func (r *Registry[K]) SetLabelSelectors(selectors ...string) error {
	if len(selectors) == 0 {
		return errors.New("watchregistry: no label selector; \"\" selects every object")
	}
	want, err := parseSelectors(selectors)
	if err != nil {
		return err
	}
	r.mu.Lock()
	old := r.selectors
	var added []string
	for _, sel := range want {
		if !slices.Contains(old, sel) {
			added = append(added, sel)
		}
	}
	if len(added) == 0 && len(want) == len(old) {
		r.mu.Unlock()
		return nil
	}
	r.prepared = slices.DeleteFunc(slices.Clone(r.prepared), func(sel string) bool { return slices.Contains(want, sel) })
	if len(want) != len(old)+len(added) {
		r.selectors = want
		var tell []notice[K]
		for name := range r.clusters {
			tell = append(tell, r.stopClusterLocked(name, true)...)
		}
		r.mu.Unlock()
		r.log.V(1).Info("Label selectors changed; informers restarted", "selectors", want, "owners", len(tell))
		r.tell(tell)
		return nil
	}
	r.selectors = append(slices.Clip(old), added...)
	var tell []notice[K]
	wake := map[*entry[K]][]K{}
	for _, e := range r.entries {
		if e.state.failed() || e.ref.LabelSelector != "" {
			// Replaced, with every selector, when tracked again; or
			// scoped by its ref's own selector.
			continue
		}
		for _, sel := range added {
			if i := slices.IndexFunc(e.parts, func(p *part[K]) bool { return p.selector == sel }); i >= 0 {
				wake[e] = append(wake[e], r.promoteLocked(e, e.parts[i])...)
				continue
			}
			if err := r.widenLocked(e, sel); err != nil {
				tell = append(tell, r.failPartLocked(e, err)...)
				break
			}
		}
		// Only now is the entry's state final: a listed prepared informer
		// joining a ref still Pending (its first list, or another selector
		// of this call listing) would wake owners whose reads fail with
		// ErrNotSynced, and who are not woken again when it syncs. They
		// are woken with the others then.
		if keys := wake[e]; len(keys) > 0 && e.state == StatePending {
			e.initMu.Lock()
			e.addInitKeysLocked(keys)
			e.initMu.Unlock()
			delete(wake, e)
		}
	}
	r.changedLocked()
	r.mu.Unlock()
	r.tell(tell)
	for e, keys := range wake {
		ev := Event{Ref: e.ref, Type: EventInitialList}
		for _, k := range keys {
			if e.stopped.Load() {
				break
			}
			r.enqueue(k, ev)
			r.stats.delivered[eventTypeIndex(EventInitialList)].Add(1)
		}
	}
	r.log.V(1).Info("Label selectors added; informers widened", "added", added)
	return nil
}

// Prepare starts, for every ref, an informer of each of selectors that is
// not in the scope yet, so that a SetLabelSelectors adding it later finds
// its list done. A prepared informer lists and watches, but is not part of
// the scope until then: reads do not see its cache, its events are not
// delivered (the owners of the objects it saw are woken when it joins), and
// the ref's state does not wait for it. A sharded operator prepares the
// buckets it would gain should a member that stopped renewing its Lease be
// gone, so that taking them over does not wait for their lists.
//
// Prepare replaces the prepared selectors: the informers of those it no
// longer names stop, and Prepare() stops them all. Selectors already in the
// scope are left as they are. Refs tracked later get informers of the
// prepared selectors too.
func (r *Registry[K]) Prepare(selectors ...string) error {
	want, err := parseSelectors(selectors)
	if err != nil {
		return err
	}
	r.mu.Lock()
	want = slices.DeleteFunc(want, func(sel string) bool { return slices.Contains(r.selectors, sel) })
	if slices.Equal(want, r.prepared) {
		r.mu.Unlock()
		return nil
	}
	r.prepared = want
	var tell []notice[K]
	for _, e := range r.entries {
		if e.state.failed() || e.ref.LabelSelector != "" {
			continue
		}
		if err := r.prepareLocked(e, want); err != nil {
			tell = append(tell, r.failPartLocked(e, err)...)
		}
	}
	r.changedLocked()
	r.mu.Unlock()
	r.tell(tell)
	r.log.V(1).Info("Label selectors prepared", "prepared", want)
	return nil
}

// failPartLocked stops an entry that could not get an informer of a
// selector, and returns its owners to tell. Not expected: the clients that
// built the entry's first informer build the others. Should it happen, the
// owners track again, for a fresh entry.
func (r *Registry[K]) failPartLocked(e *entry[K], err error) []notice[K] {
	e.log.Error(err, "Cannot add an informer of a label selector; stopping the ref's informers")
	e.stopLocked(StateStopped, &StateError{Ref: e.ref, State: StateStopped, Err: err})
	if len(e.refs) == 0 {
		delete(r.entries, e.ref)
	}
	return e.notices(nil)
}

// parseSelectors checks label selectors and drops repeats.
func parseSelectors(selectors []string) ([]string, error) {
	var want []string
	for _, sel := range selectors {
		if _, err := labels.Parse(sel); err != nil {
			return nil, fmt.Errorf("watchregistry: label selector %q: %w", sel, err)
		}
		if !slices.Contains(want, sel) {
			want = append(want, sel)
		}
	}
	return want, nil
}

// widenLocked adds an informer of selector's objects to a live entry. A
// synced entry is Pending again until that informer has listed: until then
// its cache lacks the objects of the wider scope, and a read would call
// them absent.
func (r *Registry[K]) widenLocked(e *entry[K], selector string) error {
	p, err := r.newPart(e, selector)
	if err != nil {
		return err
	}
	e.parts = append(e.parts, p)
	if e.state == StateSynced {
		e.state = StatePending
		e.startedAt = r.clock.Now()
	}
	if e.cancel != nil {
		r.runPartLocked(e, p)
	}
	return nil
}

// promoteLocked brings a prepared informer of the entry into the scope and
// returns the owners to wake. One that has listed joins at once, without
// making the entry Pending, and the owners of the objects it saw are woken
// as after a list (by the caller, once the entry is synced); one still
// listing makes the entry Pending until it has, as a widened scope does.
func (r *Registry[K]) promoteLocked(e *entry[K], p *part[K]) []K {
	e.initMu.Lock()
	p.prepared.Store(false)
	wake := slices.Collect(maps.Keys(p.wake))
	p.wake = nil
	if !p.synced {
		e.addInitKeysLocked(wake)
		wake = nil
	}
	e.initMu.Unlock()
	// The handler counts the objects it sees from now on; those cached
	// before count here. An event in flight across the two may be counted
	// twice: the figure is a gauge.
	e.objects.Add(int64(len(p.informer.GetStore().ListKeys())))
	if !p.synced && e.state == StateSynced {
		e.state = StatePending
		e.startedAt = r.clock.Now()
	}
	return wake
}

// addInitKeysLocked adds owners to wake when the entry syncs; called under
// initMu.
func (e *entry[K]) addInitKeysLocked(keys []K) {
	if len(keys) == 0 {
		return
	}
	if e.initKeys == nil {
		e.initKeys = make(map[K]struct{}, len(keys))
	}
	for _, k := range keys {
		e.initKeys[k] = struct{}{}
	}
}

// prepareLocked makes the entry's prepared informers those of selectors:
// it stops the ones no longer wanted and starts the missing ones.
func (r *Registry[K]) prepareLocked(e *entry[K], selectors []string) error {
	e.parts = slices.DeleteFunc(e.parts, func(p *part[K]) bool {
		if !p.prepared.Load() || slices.Contains(selectors, p.selector) {
			return false
		}
		p.dropped.Store(true)
		if p.cancel != nil {
			p.cancel()
		}
		p.acct.close()
		return true
	})
	for _, sel := range selectors {
		if slices.ContainsFunc(e.parts, func(p *part[K]) bool { return p.selector == sel }) {
			continue
		}
		p, err := r.newPart(e, sel)
		if err != nil {
			return err
		}
		p.prepared.Store(true)
		e.parts = append(e.parts, p)
		if e.cancel != nil {
			r.runPartLocked(e, p)
		}
	}
	return nil
}

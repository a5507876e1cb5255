// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/shard"
	"github.com/vidra-operator/vidra/internal/wakequeue"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// A replica that only gains buckets keeps its selectors and adds one for
// the buckets gained, so that it lists only their objects; a loss, a fence
// or too many selectors take it back to one selector for the whole share.
func TestShareSelectorsWidenOnGainsOnly(t *testing.T) {
	c := &Controller{Wakes: &Wakes{share: newShare(nil)}}
	steps := []struct {
		name    string
		buckets []int
		want    []string
		// restarted: the informers of the share before stop.
		restarted bool
	}{
		{"first share", []int{3, 1, 2}, []string{objectSelector([]int{1, 2, 3})}, true},
		{"same share", []int{1, 2, 3}, []string{objectSelector([]int{1, 2, 3})}, false},
		{"a replica died", []int{1, 2, 3, 7, 5}, []string{objectSelector([]int{1, 2, 3}), objectSelector([]int{5, 7})}, false},
		{"another died", []int{1, 2, 3, 5, 7, 9}, []string{objectSelector([]int{1, 2, 3}), objectSelector([]int{5, 7}), objectSelector([]int{9})}, false},
		{"a replica joined", []int{1, 3, 5, 9}, []string{objectSelector([]int{1, 3, 5, 9})}, true},
		{"no bucket", []int{}, []string{objectSelector([]int{})}, true},
		{"from none", []int{4}, []string{objectSelector([]int{4})}, true},
		{"gain", []int{4, 6}, []string{objectSelector([]int{4}), objectSelector([]int{6})}, false},
		{"gain", []int{4, 6, 8}, []string{objectSelector([]int{4}), objectSelector([]int{6}), objectSelector([]int{8})}, false},
		{"gain", []int{4, 6, 8, 10}, []string{objectSelector([]int{4}), objectSelector([]int{6}), objectSelector([]int{8}), objectSelector([]int{10})}, false},
		{"past the cap", []int{4, 6, 8, 10, 12}, []string{objectSelector([]int{4, 6, 8, 10, 12})}, true},
		{"fenced", nil, []string{objectSelector(nil)}, true},
		{"after the fence", []int{1}, []string{objectSelector([]int{1})}, true},
	}
	for _, s := range steps {
		got, restarted := c.share.selectorsFor(s.buckets)
		if !slices.Equal(got, s.want) {
			t.Fatalf("%s %v: selectors %q, want %q", s.name, s.buckets, got, s.want)
		}
		if restarted != s.restarted {
			t.Fatalf("%s %v: restarted %v, want %v", s.name, s.buckets, restarted, s.restarted)
		}
	}
	if got := objectSelector([]int{}); got == objectSelector(nil) {
		t.Fatalf("no bucket selects every object: %q", got)
	}
}

// What a replica prepares when a member is late renewing is the selector it
// adds once that member's buckets are its: the lists are then done.
func TestPreparedSelectorIsTheOneAGainAdds(t *testing.T) {
	c := &Controller{Wakes: &Wakes{share: newShare(nil)}}
	if got := c.share.preparedSelectors([]int{5}); got != nil {
		t.Fatalf("prepared %q with no share yet; the first share is listed whole", got)
	}
	c.share.selectorsFor([]int{1, 2, 3})
	prepared := c.share.preparedSelectors([]int{7, 5})
	added, _ := c.share.selectorsFor([]int{1, 2, 3, 5, 7})
	if len(prepared) != 1 || added[len(added)-1] != prepared[0] {
		t.Fatalf("prepared %q, but the gain added %q", prepared, added)
	}
	if got := c.share.preparedSelectors(nil); got != nil {
		t.Fatalf("prepared %q for no bucket", got)
	}
	c.share.selectorsFor([]int{1, 2, 3, 5, 7, 9})
	c.share.selectorsFor([]int{1, 2, 3, 5, 7, 9, 11})
	if got := c.share.preparedSelectors([]int{13}); got != nil {
		t.Fatalf("prepared %q at the cap of selectors, where a gain lists the whole share", got)
	}
}

// testShard is a Shard whose view a test settles and unsettles.
type testShard struct {
	mu      sync.Mutex
	settled bool
	owned   map[int]bool
}

func (s *testShard) Owns(key cache.ObjectName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settled && s.owned[shard.Bucket(key)]
}

func (s *testShard) Enter(ctx context.Context, key cache.ObjectName) (context.Context, func(), bool) {
	if !s.Owns(key) {
		return ctx, nil, false
	}
	return ctx, func() {}, true
}

// settle settles the view with buckets this replica's; none unsettles it.
func (s *testShard) settle(buckets ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settled = len(buckets) > 0
	s.owned = map[int]bool{}
	for _, b := range buckets {
		s.owned[b] = true
	}
}

// After a handoff that only widened this replica's informers, it
// reconciles the resources it gained and, of those it kept, only the ones
// whose reconciles it dropped while the share changed: an event, a
// reconcile already queued. Every other kept resource's objects were
// watched throughout. After a change that restarted the informers, every
// kept resource is verified again.
func TestGainOnlyRebalanceReconcilesGainedAndMissedKeys(t *testing.T) {
	// Resources in buckets of their own: kept ones with an event dropped
	// (event), a queued reconcile dropped (queued) and nothing (quiet), one
	// deleted meanwhile, one gained, and one always another replica's.
	names := []string{"event", "queued", "quiet", "deleted", "gained", "other"}
	bucket := map[string]int{}
	taken := map[int]bool{}
	var vrs []*v1alpha1.VidraResource
	for i := 0; len(vrs) < len(names); i++ {
		name := fmt.Sprintf("%s-%d", names[len(vrs)], i)
		b := shard.Bucket(cache.ObjectName{Namespace: operatorNS, Name: name})
		if taken[b] {
			continue
		}
		taken[b] = true
		bucket[names[len(vrs)]] = b
		vrs = append(vrs, newVR(operatorNS, name, configMapManifest))
	}
	key := func(name string) cache.ObjectName {
		for _, vr := range vrs {
			if vr.Name[:len(name)] == name {
				return cache.MetaObjectToName(vr)
			}
		}
		t.Fatalf("no resource %s", name)
		return cache.ObjectName{}
	}
	// The registry is not started: it records references and tells the
	// owners of the informers a new selector replaces, and no informer
	// runs whose wakes, delivered from its own goroutine after it lists,
	// could land in a step and pass for a reconcile that step dropped.
	f := newFixture(t, vrs)
	c := f.newController()
	ctx := t.Context()
	sh := &testShard{}
	c.share = newShare(sh)
	// queued returns the keys the queue holds, each with the trigger its
	// reconcile would count, and empties it.
	queued := func() map[string]Trigger {
		got := map[string]Trigger{}
		for c.queue.Len() > 0 {
			it, _ := c.queue.Get()
			got[it.Key.Name], _ = c.queue.Take(wakequeue.Item{Key: it.Key, Got: f.clock.Now()})
			c.queue.Done(it)
		}
		return got
	}
	expect := func(step string, want map[string]Trigger) {
		t.Helper()
		got := queued()
		wantNames := map[string]Trigger{}
		for name, tr := range want {
			wantNames[key(name).Name] = tr
		}
		if !maps.Equal(got, wantNames) {
			t.Fatalf("%s: queued %v, want %v", step, got, wantNames)
		}
	}
	track := func(names ...string) {
		for _, name := range names {
			if err := c.registry.Track(key(name), []watchregistry.Ref{configMapsRef}); err != nil {
				t.Fatal(err)
			}
		}
	}

	first := []int{bucket["event"], bucket["queued"], bucket["quiet"], bucket["deleted"]}
	sh.settle(first...)
	c.ShardChanged(ctx, first)
	expect("first share", map[string]Trigger{"event": TriggerRebalance, "queued": TriggerRebalance, "quiet": TriggerRebalance,
		"deleted": TriggerRebalance})
	track("event", "queued", "quiet", "deleted")

	// A reconcile queued before the view changed, handed out after.
	c.enqueue(key("queued"), TriggerHealth)
	sh.settle()
	c.processNextWorkItem(ctx)
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("%d keys queued after the unsettled view dropped one", n)
	}
	c.enqueue(key("event"), TriggerEvent)
	c.enqueue(key("other"), TriggerEvent)
	c.enqueueAfter(key("event"), TriggerInterval, syncInterval)
	deleted, err := c.lister.VidraResources(operatorNS).Get(key("deleted").Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.indexer.Delete(deleted); err != nil {
		t.Fatal(err)
	}
	c.enqueue(key("deleted"), TriggerEvent)

	gain := append(slices.Clone(first), bucket["gained"])
	sh.settle(gain...)
	c.ShardChanged(ctx, gain)
	expect("a member gone", map[string]Trigger{"gained": TriggerRebalance, "event": TriggerEvent, "queued": TriggerHealth})
	if refs := c.registry.Refs(key("deleted")); len(refs) != 0 {
		t.Errorf("the resource deleted meanwhile still holds %v", refs)
	}
	track("gained")

	// Settled: a dropped reconcile is not recorded, nor the next change's.
	c.enqueue(key("other"), TriggerEvent)
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("another replica's key queued")
	}
	sh.settle()
	lose := []int{bucket["event"], bucket["quiet"], bucket["gained"]}
	sh.settle(lose...)
	c.ShardChanged(ctx, lose)
	// The registry tells the owners of the informers it stops, an event
	// that outranks the rebalance.
	expect("a member joined", map[string]Trigger{"event": TriggerEvent, "quiet": TriggerEvent, "gained": TriggerEvent})
	if refs := c.registry.Refs(key("queued")); len(refs) != 0 {
		t.Errorf("the lost resource still holds %v", refs)
	}

	// A miss recorded after ShardChanged took the missed keys (the view
	// settled between Owns and the record) is queued at once.
	c.miss(key("quiet"), TriggerEvent)
	expect("a late miss", map[string]Trigger{"quiet": TriggerEvent})
}

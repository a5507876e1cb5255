// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/shard"
	"github.com/vidra-operator/vidra/internal/wakequeue"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// maxShareSelectors caps the informers a replica runs per resource for the
// buckets it gained one rebalance at a time; past it, a rebalance lists the
// whole share again, under one selector.
const maxShareSelectors = 4

// share is the controller's side of sharding (Options.Shard): which keys
// are this replica's, and, while a share changes hands, the reconciles it
// dropped. Without sharding every key is this replica's.
type share struct {
	shard Shard

	mu sync.Mutex
	// held is the share ShardChanged last took on, by bucket, and missed
	// the keys of that share whose reconciles were dropped since because
	// the share was changing, each with its most significant trigger: a
	// change that keeps the informers running reconciles these of the
	// keys it keeps, not every one (see ShardChanged).
	held   [shard.Buckets]bool
	missed map[cache.ObjectName]Trigger

	// buckets is this replica's share, nil until it has one, and
	// selectors the watch registry's label selectors: one per share taken
	// on since the last that dropped a bucket. Only ShardChanged and
	// ShardPrepare use them, from the shard member's goroutine.
	buckets   []int
	selectors []string
}

func newShare(s Shard) *share {
	return &share{shard: s, missed: map[cache.ObjectName]Trigger{}}
}

// owns reports whether key is this replica's now.
func (s *share) owns(key cache.ObjectName) bool { return s.shard == nil || s.shard.Owns(key) }

// enter is Shard.Enter: whether this replica reconciles key now, with the
// context to do it in and the function to call once it is over.
func (s *share) enter(ctx context.Context, key cache.ObjectName) (_ context.Context, leave func(), ok bool) {
	if s.shard == nil {
		return ctx, func() {}, true
	}
	return s.shard.Enter(ctx, key)
}

// missed records a reconcile of key for t dropped because this replica did
// not own it, when key was in the share last taken on, and reports whether
// key is this replica's after all: the share may have settled since, and
// ShardChanged taken the missed keys before this one was added.
func (s *share) miss(key cache.ObjectName, t Trigger) bool {
	s.mu.Lock()
	if !s.held[shard.Bucket(key)] {
		s.mu.Unlock()
		return false
	}
	if prev, ok := s.missed[key]; !ok || wakequeue.Significance(t) < wakequeue.Significance(prev) {
		s.missed[key] = t
	}
	s.mu.Unlock()
	return s.owns(key)
}

// takeOn records buckets as the share held, and returns the reconciles
// missed under the share before.
func (s *share) takeOn(buckets []int) map[cache.ObjectName]Trigger {
	s.mu.Lock()
	defer s.mu.Unlock()
	missed := s.missed
	s.missed = map[cache.ObjectName]Trigger{}
	s.held = [shard.Buckets]bool{}
	for _, b := range buckets {
		s.held[b] = true
	}
	return missed
}

// miss records a reconcile of key dropped because this replica did not
// own it: when key was in the share last taken on, the share is changing
// (or this replica lost key), and ShardChanged reconciles it should this
// replica keep it. Queued here if the share settled meanwhile; queued
// twice otherwise, which the queue folds into one.
func (w *Wakes) miss(key cache.ObjectName, t Trigger) {
	if w.share.miss(key, t) {
		w.queue.Add(key, t)
	}
}

// ShardChanged takes on a new share of the VidraResources (see
// Options.Shard): buckets are this replica's. The watch registry's
// informers then select the objects of those buckets only: a replica that
// only gained buckets keeps its informers and adds one per resource for the
// objects of the buckets gained, so that it lists only those (the handoff
// after a replica died); one that lost any restarts them under one
// selector, and lists its whole share again. The keys this replica lost are
// forgotten, with their informers' references. Those it gained are
// reconciled. Of those it kept, all are reconciled when the informers
// restarted, since what changed while they listed again went unseen; when
// they kept running, only the keys whose reconciles were dropped while
// the share changed (miss): every other change of their objects was seen.
func (c *Controller) ShardChanged(ctx context.Context, buckets []int) {
	logger := klog.FromContext(ctx)
	vrs, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	selectors, restarted := c.share.selectorsFor(buckets)
	missed := c.share.takeOn(buckets)
	// The keys this replica gains first: nobody serves them now. Their
	// first reconciles wait for the informers' lists of the new buckets
	// (they start once this returns: Enter waits for it, so none reads an
	// informer of the old scope, which would call the gained objects
	// absent); the keys kept come after them.
	var kept []cache.ObjectName
	listed := make(map[cache.ObjectName]bool, len(vrs))
	for _, vr := range vrs {
		key := cache.MetaObjectToName(vr)
		listed[key] = true
		switch {
		case !c.share.owns(key):
			c.forget(key)
		case len(c.registry.Refs(key)) > 0:
			kept = append(kept, key)
		default:
			c.enqueue(key, TriggerRebalance)
		}
	}
	if err := c.registry.SetLabelSelectors(selectors...); err != nil {
		logger.Error(err, "Selecting the objects of this replica's buckets failed")
	}
	// A resource deleted while the share changed, whose delete was missed,
	// lets go of its informers here.
	for key := range missed {
		if !listed[key] {
			c.forget(key)
		}
	}
	verify := 0
	for _, key := range kept {
		switch t, ok := missed[key]; {
		case restarted:
			c.enqueue(key, TriggerRebalance)
		case ok:
			c.enqueue(key, t)
		default:
			continue
		}
		verify++
	}
	logger.V(1).Info("Watching the objects of this replica's buckets", "buckets", len(buckets), "selectors", len(selectors),
		"informersRestarted", restarted, "keptKeys", len(kept), "keptKeysReconciled", verify)
}

// selectorsFor records buckets as this replica's share and returns the
// watch registry's selectors for it: those of the share before plus one
// for the buckets gained, when none was lost. restarted reports whether
// the informers of the share before stop: there was none, or the
// selectors were replaced rather than added to.
func (s *share) selectorsFor(buckets []int) (selectors []string, restarted bool) {
	prev, widens := s.buckets, s.widens()
	// nil is no share yet (or a fenced replica), as objectSelector takes it.
	s.buckets = slices.Clone(buckets)
	slices.Sort(s.buckets)
	var gained []int
	lost := false
	for _, b := range s.buckets {
		if _, found := slices.BinarySearch(prev, b); !found {
			gained = append(gained, b)
		}
	}
	for _, b := range prev {
		if _, found := slices.BinarySearch(s.buckets, b); !found {
			lost = true
		}
	}
	switch {
	case prev == nil || s.buckets == nil || lost || (len(gained) > 0 && !widens):
		s.selectors = []string{objectSelector(s.buckets)}
		restarted = true
	case len(gained) > 0:
		s.selectors = append(slices.Clip(s.selectors), objectSelector(gained))
	}
	return s.selectors, restarted
}

// ShardPrepare lists ahead the objects of buckets, those this replica
// would gain should the members that missed their Lease renewals be gone
// (see shard.Options.OnPrepare): the watch registry runs informers of
// their objects beside the scope's, neither read nor delivering events,
// and the selector ShardChanged adds for the buckets gained when the Lease
// expires is theirs, so the handoff does not wait for those lists. No
// buckets stops them. Runs on the shard member's goroutine, as
// ShardChanged does.
func (c *Controller) ShardPrepare(ctx context.Context, buckets []int) {
	sels := c.share.preparedSelectors(buckets)
	if err := c.registry.Prepare(sels...); err != nil {
		klog.FromContext(ctx).Error(err, "Listing ahead the objects of the buckets this replica would take over failed")
	}
}

// preparedSelectors returns the selector that selectorsFor would add
// should this replica gain buckets, none when it would not add one: when
// it has no share yet, or has as many selectors as it keeps, it would list
// its whole share again, and nothing prepared helps with that.
func (s *share) preparedSelectors(buckets []int) []string {
	if len(buckets) == 0 || !s.widens() {
		return nil
	}
	gained := slices.Clone(buckets)
	slices.Sort(gained)
	return []string{objectSelector(gained)}
}

// widens reports whether a gain of buckets, with none lost, would add a
// selector to the share's (see selectorsFor) rather than list the whole
// share again under one: there is a share, and fewer selectors than kept.
func (s *share) widens() bool {
	return len(s.buckets) > 0 && len(s.selectors) < maxShareSelectors
}

// OwnedKeys counts the VidraResources this replica owns: all of them
// without sharding.
func (c *Controller) OwnedKeys() int {
	vrs, err := c.lister.List(labels.Everything())
	if err != nil {
		return 0
	}
	n := 0
	for _, vr := range vrs {
		if c.share.owns(cache.MetaObjectToName(vr)) {
			n++
		}
	}
	return n
}

// objectSelector selects the managed objects the watch registry caches:
// every object with Vidra's marks, or, for a replica of a sharded operator,
// those of its buckets (all 256: every object, as without sharding).
func objectSelector(buckets []int) string {
	sel := v1alpha1.ManagedByLabel + "=" + v1alpha1.ManagedByValue + "," + v1alpha1.OwnerUIDLabel
	if buckets == nil || len(buckets) == shard.Buckets {
		return sel
	}
	if len(buckets) == 0 {
		// No bucket is this replica's: select nothing.
		return sel + "," + v1alpha1.BucketLabel + " in (none)"
	}
	values := make([]string, len(buckets))
	for i, b := range buckets {
		values[i] = strconv.Itoa(b)
	}
	return sel + "," + v1alpha1.BucketLabel + " in (" + strings.Join(values, ",") + ")"
}

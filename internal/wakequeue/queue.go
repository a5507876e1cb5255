// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakequeue

import (
	"cmp"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// MaxDelay bounds how long a key waits in the queue. The queue keeps a
// waiting key until it is due, even once its resource is gone, and
// spec.interval and spec.timeout have no upper bound: a tenant creating and
// deleting resources of an interval of 2,000,000h would leave entries for
// centuries. A resource whose interval or health wait is longer is looked
// at again daily, which a level-triggered reconcile allows.
const MaxDelay = 24 * time.Hour

// Options configure a Queue.
type Options struct {
	// Name names the queue in client-go's workqueue metrics.
	Name string
	// Clock tells the queue's and the rate limiter's time; nil means the
	// real clock.
	Clock clock.WithTicker
	// Metrics, if set, receives the queue's depth, latency and retries.
	Metrics workqueue.MetricsProvider
}

// Queue is a rate-limited work queue of VidraResource keys that records
// why each key was queued (see the package's documentation).
type Queue struct {
	q       workqueue.TypedRateLimitingInterface[cache.ObjectName]
	limiter workqueue.TypedRateLimiter[cache.ObjectName]
	fair    *fairQueue
	clock   clock.WithTicker

	mu       sync.Mutex
	triggers map[cache.ObjectName]map[Trigger]pending
	// last is the trigger of each key's latest reconcile: a key queued
	// again while it was being reconciled, by a cause that reconcile took,
	// runs again for that cause.
	last map[cache.ObjectName]Trigger
	// putOff are the keys put off once (PutOff), whose next reconcile runs.
	putOff map[cache.ObjectName]struct{}
}

// pending is a recorded cause of a queued key: when it was recorded, and
// when the queue hands the key out for it.
type pending struct {
	added, due time.Time
}

// Item is a key handed out by Get, with when it was.
type Item struct {
	Key cache.ObjectName
	Got time.Time
}

// New builds a queue: fair between namespaces, every retry rate-limited
// per key (200ms doubling to 5m) and per namespace (20 a second, bursts of
// 200). An unknown kind or an unreachable destination is retried soon, then
// ever more patiently, and a burst of failures in one namespace (a CRD
// deleted under hundreds of a tenant's resources) does not hammer the API
// server nor make other namespaces' retries wait behind it.
func New(opts Options) *Queue {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Name == "" {
		opts.Name = "vidraresources"
	}
	fair := newFairQueue()
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](200*time.Millisecond, 5*time.Minute),
		newNamespaceBucketLimiter(opts.Clock, 20, 200),
	)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		limiter,
		workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{
			Clock: opts.Clock,
			DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[cache.ObjectName]{
				Name: opts.Name, Clock: opts.Clock, MetricsProvider: opts.Metrics,
				Queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[cache.ObjectName]{
					Name: opts.Name, Clock: opts.Clock, MetricsProvider: opts.Metrics, Queue: fair,
				}),
			}),
		},
	)
	return &Queue{
		q: q, limiter: limiter, fair: fair, clock: opts.Clock,
		triggers: map[cache.ObjectName]map[Trigger]pending{},
		last:     map[cache.ObjectName]Trigger{},
		putOff:   map[cache.ObjectName]struct{}{},
	}
}

// Add queues key now, for t.
func (q *Queue) Add(key cache.ObjectName, t Trigger) {
	q.record(key, t, q.clock.Now())
	q.q.Add(key)
}

// AddAfter queues key for t once d has passed, MaxDelay at most.
func (q *Queue) AddAfter(key cache.ObjectName, t Trigger, d time.Duration) {
	d = min(d, MaxDelay)
	q.record(key, t, q.clock.Now().Add(d))
	q.q.AddAfter(key, d)
}

// Retry queues key again after its backoff, as a retry. It is what
// AddRateLimited does, with the retry recorded as due when the queue hands
// the key out again: recorded as due now, a reconcile woken by something
// else meanwhile would take it, and the late re-add would then be counted
// as an event.
func (q *Queue) Retry(key cache.ObjectName) {
	d := q.limiter.When(key)
	q.record(key, TriggerRetry, q.clock.Now().Add(d))
	q.q.AddAfter(key, d)
}

// Forget ends key's backoff: its next failure is retried after the first
// step again.
func (q *Queue) Forget(key cache.ObjectName) { q.q.Forget(key) }

// NumRequeues counts key's retries since its backoff last ended.
func (q *Queue) NumRequeues(key cache.ObjectName) int { return q.q.NumRequeues(key) }

// Get waits for the next key; ok is false once the queue is shut down.
func (q *Queue) Get() (_ Item, ok bool) {
	key, shutdown := q.q.Get()
	return Item{Key: key, Got: q.clock.Now()}, !shutdown
}

// Done tells the queue that the work on it is over: the key may be handed
// out again.
func (q *Queue) Done(it Item) {
	// Before Done: a key re-added meanwhile is pushed back on Done, and
	// its namespace must not count this reconcile as still running then.
	q.fair.finished(it.Key)
	q.q.Done(it.Key)
}

// Take removes and returns the most significant cause of it that was due
// when it was handed out, and whether it was put off once (PutOff) before.
// Causes recorded after that stay: the key was queued again for them
// while it was being handed out, and the queue runs it again. A run with
// no cause of its own is such a second run whose cause the first took: it
// counts under the first's trigger.
func (q *Queue) Take(it Item) (t Trigger, putOff bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, putOff = q.putOff[it.Key]
	delete(q.putOff, it.Key)
	m := q.triggers[it.Key]
	// A little slack: the delaying queue may hand out an item a hair
	// before the clock reads its due time.
	dueBy := it.Got.Add(10 * time.Millisecond)
	for _, c := range order {
		if p, ok := m[c]; ok && !p.due.After(dueBy) && !p.added.After(it.Got) {
			if t == "" {
				t = c
			}
			delete(m, c)
		}
	}
	if len(m) == 0 {
		delete(q.triggers, it.Key)
	}
	t = cmp.Or(t, q.last[it.Key], TriggerEvent)
	q.last[it.Key] = t
	return t, putOff
}

// PutOff queues key again for t, behind the keys queued already, and marks
// it so that its next run is not put off again.
func (q *Queue) PutOff(key cache.ObjectName, t Trigger) {
	q.mu.Lock()
	q.putOff[key] = struct{}{}
	q.mu.Unlock()
	q.Add(key, t)
}

// Drop forgets the recorded causes of key, whose resource is gone or not
// this replica's, and returns the most significant of them (TriggerEvent
// when none was recorded).
func (q *Queue) Drop(key cache.ObjectName) Trigger {
	q.mu.Lock()
	defer q.mu.Unlock()
	picked := TriggerEvent
	for _, t := range order {
		if _, ok := q.triggers[key][t]; ok {
			picked = t
			break
		}
	}
	delete(q.triggers, key)
	delete(q.last, key)
	delete(q.putOff, key)
	return picked
}

// Due reports when key is due for t, if it is queued for t.
func (q *Queue) Due(key cache.ObjectName, t Trigger) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	p, ok := q.triggers[key][t]
	return p.due, ok
}

// Len is the number of keys waiting to be handed out.
func (q *Queue) Len() int { return q.q.Len() }

// ShutDown ends Get for the workers once the queue is empty.
func (q *Queue) ShutDown() { q.q.ShutDown() }

// record records why key was queued. A cause due later than an equal one
// already recorded is dropped: the queue, too, keeps the earliest.
func (q *Queue) record(key cache.ObjectName, t Trigger, due time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.triggers[key]
	if m == nil {
		m = map[Trigger]pending{}
		q.triggers[key] = m
	}
	if prev, ok := m[t]; !ok || due.Before(prev.due) {
		m[t] = pending{added: q.clock.Now(), due: due}
	}
}

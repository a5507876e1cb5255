// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakequeue

import (
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/internal/nsbucket"
)

// fairQueue is the work queue's storage (client-go's workqueue.Queue): one
// FIFO per namespace, served so that the namespace with the fewest reconciles
// in flight goes first, round robin among equals. A tenant with a backlog
// (hundreds of resources, or many failing ones) then delays another
// namespace's resource by the reconciles already running, never by the
// length of its own backlog, which a plain FIFO would make everyone wait
// through.
//
// Touch, Push, Len and Pop are called by the workqueue under its lock;
// finished comes from workers, hence the mutex.
type fairQueue struct {
	mu sync.Mutex
	// queues holds the waiting keys of each namespace, oldest first.
	queues map[string][]cache.ObjectName
	// order is the rotation of namespaces with waiting keys: a namespace
	// served goes to the back.
	order []string
	// inflight counts, per namespace, keys popped and not yet finished.
	inflight map[string]int
	n        int
}

var _ workqueue.Queue[cache.ObjectName] = (*fairQueue)(nil)

func newFairQueue() *fairQueue {
	return &fairQueue{queues: map[string][]cache.ObjectName{}, inflight: map[string]int{}}
}

// Touch keeps a re-added key where it is: the workqueue dedups keys, and a
// key's place in its namespace's line is not a priority.
func (q *fairQueue) Touch(cache.ObjectName) {}

func (q *fairQueue) Push(key cache.ObjectName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queues[key.Namespace]) == 0 {
		q.order = append(q.order, key.Namespace)
	}
	q.queues[key.Namespace] = append(q.queues[key.Namespace], key)
	q.n++
}

func (q *fairQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// Pop takes the oldest key of the namespace with the fewest keys in flight,
// the earliest in the rotation among equals. The workqueue calls it only
// when Len is above zero.
func (q *fairQueue) Pop() cache.ObjectName {
	q.mu.Lock()
	defer q.mu.Unlock()
	best := 0
	for i, ns := range q.order[1:] {
		if q.inflight[ns] < q.inflight[q.order[best]] {
			best = i + 1
		}
	}
	ns := q.order[best]
	line := q.queues[ns]
	key := line[0]
	line[0] = cache.ObjectName{}
	q.order = append(q.order[:best], q.order[best+1:]...)
	if len(line) == 1 {
		delete(q.queues, ns)
	} else {
		q.queues[ns] = line[1:]
		q.order = append(q.order, ns)
	}
	q.inflight[ns]++
	q.n--
	return key
}

// finished tells the queue that a key popped earlier is done with.
func (q *fairQueue) finished(key cache.ObjectName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.inflight[key.Namespace] <= 1 {
		delete(q.inflight, key.Namespace)
		return
	}
	q.inflight[key.Namespace]--
}

// namespaceBucketLimiter is a token bucket per namespace: it caps how often
// the keys of one namespace may be retried together (a CRD deleted under
// hundreds of a tenant's resources) without taking the retries of other
// namespaces into the same line, as one shared bucket would. Its buckets
// refill by the clock of the queue whose delays it computes.
type namespaceBucketLimiter struct {
	buckets *nsbucket.Buckets
	clock   clock.PassiveClock
}

var _ workqueue.TypedRateLimiter[cache.ObjectName] = namespaceBucketLimiter{}

func newNamespaceBucketLimiter(clk clock.PassiveClock, qps float64, burst int) namespaceBucketLimiter {
	return namespaceBucketLimiter{buckets: nsbucket.New(qps, burst), clock: clk}
}

func (l namespaceBucketLimiter) When(key cache.ObjectName) time.Duration {
	return l.buckets.Reserve(key.Namespace, l.clock.Now())
}

func (l namespaceBucketLimiter) Forget(cache.ObjectName) {}

func (l namespaceBucketLimiter) NumRequeues(cache.ObjectName) int { return 0 }

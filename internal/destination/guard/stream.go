// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"io"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// eventLimitBody ends a watch stream at an event over the guard's limits,
// before client-go's decoder buffers it: its JSON framer reads a whole
// value, however large, before it looks at it. It follows the framing as
// the bytes pass: the nesting of brackets outside strings (an event ends
// where it returns to the top level). It also ends the stream, cleanly,
// after an event over limits.retain, counts what the stream holds in its
// namespace's watch pool (see maxWatchPoolBytes), and reads no faster than
// the pool's events allow (see watchEventRate).
type eventLimitBody struct {
	body  io.ReadCloser
	guard *answerGuard
	err   error
	log   klog.Logger

	// due is when the stream may be read again, after the events it
	// delivered (see charge); unpaced counts the bytes it read since it
	// last paid for them.
	due     time.Time
	unpaced int64

	// n counts the bytes of the current event, scan its syntax and values.
	n    int64
	scan jsonScan
	// largest is the largest event the stream carried, for which client-go
	// keeps buffers; room is what the pool counts for the stream, as Read
	// last set it.
	largest, room int64

	// mu orders Close, which gives the stream's bytes back to the pool,
	// against Read taking more.
	mu     sync.Mutex
	closed bool
	pooled int64
	// done is closed by Close, cancel with the request's context: a Read
	// waiting for its due time leaves.
	done   chan struct{}
	cancel <-chan struct{}
}

// poolStep is the granularity of a stream's count in its pool, so that the
// pool's lock is not taken for every byte.
const poolStep = 4 << 10

func (b *eventLimitBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if wait := b.due.Sub(b.guard.now()); wait > 0 && !b.guard.pause(wait, b.done, b.cancel) {
		// Closed, or its request ended, while it waited: the watch was
		// stopped.
		b.err = io.EOF
		return 0, b.err
	}
	n, err := b.body.Read(p)
	for i := range n {
		ended, ferr := b.next(p[i])
		if ferr != nil {
			b.err = ferr
			if g := b.guard; g.failed != nil {
				g.failed(b.err)
			}
			return i, b.err
		}
		if ended {
			// The event is complete: client-go decodes it, then sees the
			// end of the stream, and watches again from there.
			b.err = io.EOF
			return i + 1, nil
		}
	}
	return n, err
}

// Close gives what the stream held back to the pool.
func (b *eventLimitBody) Close() error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.done)
		if p := b.guard.pool; p != nil {
			p.resize(b.pooled, 0)
		}
		b.pooled = 0
	}
	b.mu.Unlock()
	return b.body.Close()
}

// resize sets what the pool counts for the stream, and reports whether the
// pool had room. A closed stream holds nothing, and takes nothing more.
func (b *eventLimitBody) resize(to int64) bool {
	p := b.guard.pool
	if p == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return true
	}
	if !p.resize(b.pooled, to) {
		return false
	}
	b.pooled, b.room = to, to
	return true
}

// next takes the next byte of the stream. It returns an error once the
// current event has passed a limit or its namespace's pool, and reports
// whether an event over limits.retain ended with it.
func (b *eventLimitBody) next(c byte) (bool, error) {
	g := b.guard
	b.n++
	ended := b.scan.feed(c)
	switch {
	case b.n > g.limits.event:
		return false, g.tooLarge("a watch event", g.limits.event, 0)
	case g.limits.eventValues > 0 && b.scan.values > g.limits.eventValues:
		return false, g.tooLarge("a watch event", 0, g.limits.eventValues)
	}
	if ended {
		// An event, or the white space between events, ended.
		size := b.n
		b.n, b.scan.values = 0, 0
		b.charge(size, !isSpace(c))
		if g.limits.retain > 0 && size > g.limits.retain {
			return true, nil
		}
		if size > b.largest {
			b.largest = size
		}
		if want := watchStreamBytes + b.largest; want < b.room {
			b.resize(want)
		}
		return false, nil
	}
	if g.pool != nil && watchStreamBytes+b.n > b.room && !b.resize(watchStreamBytes+b.n+poolStep) {
		return false, g.poolFull()
	}
	return false, nil
}

// charge pays, in the pool's events, for size bytes of the stream, which
// ended an event or white space, and sets when the stream may be read
// again. White space is paid for by the eventUnitBytes, as it comes: a
// server could send nothing else.
func (b *eventLimitBody) charge(size int64, event bool) {
	p := b.guard.pool
	if p == nil || p.events == nil {
		return
	}
	b.unpaced += size
	units := b.unpaced / eventUnitBytes
	if event {
		units++
	}
	if units == 0 {
		return
	}
	b.unpaced %= eventUnitBytes
	units = min(units, int64(p.events.Burst()))
	now := b.guard.now()
	wait := p.events.ReserveN(now, int(units)).DelayFrom(now)
	if wait <= 0 {
		return
	}
	if due := now.Add(wait); due.After(b.due) {
		b.due = due
	}
	if p.slowed(now) {
		b.log.Info("Slowed the watches of a namespace's remote clusters: their servers send more events than Vidra reads for one namespace",
			"namespace", p.namespace, "server", b.guard.server, "eventsPerSecond", float64(p.events.Limit()), "burst", p.events.Burst())
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/wakequeue"
)

// A resource that is gone leaves nothing behind for its name: no recorded
// cause, and no queue entry due later than a day, whatever its interval.
func TestAGoneResourceLeavesNoCauseAndNoDistantQueueEntry(t *testing.T) {
	f := newFixture(t, nil)
	c := f.newController()
	key := cache.ObjectName{Namespace: operatorNS, Name: "gone"}
	c.enqueueAfter(key, TriggerInterval, 2_000_000*time.Hour)
	due, _ := c.queue.Due(key, TriggerInterval)
	if limit := c.clock.Now().Add(wakequeue.MaxDelay); due.After(limit) {
		t.Errorf("queued for %s, want at most %s from now", due, wakequeue.MaxDelay)
	}
	c.forget(key)
	if due, ok := c.queue.Due(key, TriggerInterval); ok {
		t.Errorf("the cause of a forgotten resource is still recorded, due %s", due)
	}
}

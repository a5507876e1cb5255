// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/health"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// healthStatusChanged reports whether a change of health of an object
// (watchregistry.EventDigestChanged) changed its status, not only its
// message.
func healthStatusChanged(ev watchregistry.Event) bool {
	if ev.Old == nil || ev.Object == nil {
		return true
	}
	was, _ := health.Of(ev.Old)
	is, _ := health.Of(ev.Object)
	return was != is
}

// healthChanged queues key for a change of health of one of its objects,
// paced (see wakequeue.Pacer).
func (w *Wakes) healthChanged(key cache.ObjectName, ev watchregistry.Event) {
	d := w.health.Wake(key, healthStatusChanged(ev), w.clock.Now())
	if d <= 0 {
		w.enqueue(key, TriggerHealth)
		return
	}
	w.enqueueAfter(key, TriggerHealth, d)
}

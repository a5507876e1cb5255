// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"math/rand/v2"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/config"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// ConfigChanged acts on a new configuration at once:
//   - resources that now correct drift on events (eventBasedReconcile turned
//     on), and every resource when the hand-edit managers changed, are
//     re-checked now: while events were off, or under the old rules, their
//     objects may have drifted with nothing to wake them;
//   - otherwise, when the interval or jitter changed, every periodic
//     re-check is re-scheduled, so that a shorter interval applies now
//     rather than after the old, longer one.
func (c *Controller) ConfigChanged(old, cur *config.Config) {
	if old == nil {
		return
	}
	eventsOn := !old.EventBased && cur.EventBased
	managers := !slices.Equal(old.OverrideManagers, cur.OverrideManagers)
	reschedule := old.RequeueAfter != cur.RequeueAfter || old.Jitter != cur.Jitter
	if !eventsOn && !managers && !reschedule {
		return
	}
	vrs, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, vr := range vrs {
		key := cache.MetaObjectToName(vr)
		switch {
		case managers || (eventsOn && c.eventMode(vr)):
			c.enqueue(key, TriggerInterval)
		case reschedule:
			if d := c.interval(vr); d > 0 {
				c.enqueueAfter(key, TriggerInterval, d)
			}
		}
	}
}

// interval is the resource's periodic re-check with jitter; 0 means none.
func (c *Controller) interval(vr *v1alpha1.VidraResource) time.Duration {
	cfg := c.config()
	return config.Jittered(cfg.Interval(vr.Spec.Interval), cfg.Jitter, rand.Float64)
}

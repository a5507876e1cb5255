// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahubsync

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/internal/infrahub/webhook"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// Webhooks coalesce into one pass that knows every artifact they named,
// at most one webhook pass per minWebhookGap per sync; past
// MaxSyncArtifacts named, the pass is whole.
func TestWebhooksCoalesceAndAreRateLimitedPerSync(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	c := &Controller{
		clock: clk, triggers: map[cache.ObjectName]Trigger{},
		hints: map[cache.ObjectName]*hints{}, lastWebhookPass: map[cache.ObjectName]time.Time{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Clock: clk}),
	}
	defer c.queue.ShutDown()
	a, b := cache.ObjectName{Namespace: "ns", Name: "a"}, cache.ObjectName{Namespace: "ns", Name: "b"}

	c.Wake(a, webhook.Wake{ArtifactID: "x1"})
	c.Wake(a, webhook.Wake{ArtifactID: "x2"})
	c.Wake(b, webhook.Wake{ArtifactID: "y"})
	if n := c.queue.Len(); n != 2 {
		t.Fatalf("queue holds %d keys, want 2: the two events of a coalesce", n)
	}
	key, _ := c.queue.Get()
	trigger := c.takeTrigger(key)
	h := c.takeHints(key, trigger)
	c.queue.Done(key)
	if trigger != TriggerWebhook || h == nil || h.full || len(h.artifacts) != 2 {
		t.Fatalf("pass of %v: trigger %s, hints %+v; want a webhook pass of two artifacts", key, trigger, h)
	}

	t.Log("a webhook within the gap waits for it")
	c.Wake(a, webhook.Wake{ArtifactID: "x3"})
	if n := c.queue.Len(); n != 1 {
		t.Fatalf("queue holds %d keys, want b's alone while a waits out the gap", n)
	}
	clk.Step(minWebhookGap)
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return c.queue.Len() == 2, nil
	})
	if err != nil {
		t.Fatal("the delayed webhook pass never came")
	}

	t.Log("more artifacts named than a sync holds: a whole pass")
	for i := range v1alpha1.MaxSyncArtifacts + 1 {
		c.Wake(b, webhook.Wake{ArtifactID: fmt.Sprint(i)})
	}
	if h := c.takeHints(b, TriggerWebhook); h == nil || !h.full {
		t.Errorf("hints %+v; want a whole pass", h)
	}
}

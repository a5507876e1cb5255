package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func TestAuditDeletedResourcesLeaveTriggers(t *testing.T) {
	var vrs []*v1alpha1.VidraResource
	for i := range 50 {
		vrs = append(vrs, newVR(operatorNS, fmt.Sprintf("r%d", i), configMapManifest, func(vr *v1alpha1.VidraResource) {
			vr.Spec.Interval = &metav1.Duration{Duration: 2000000 * time.Hour}
		}))
	}
	f := newFixture(t, vrs)
	c := f.newController()
	f.c = c
	ctx := context.Background()
	for _, vr := range vrs {
		key := cache.MetaObjectToName(vr)
		res, err := c.sync(ctx, key)
		c.handleErr(ctx, key, res, err)
	}
	for _, vr := range vrs {
		key := cache.MetaObjectToName(vr)
		if err := c.indexer.Delete(vr); err != nil {
			t.Fatal(err)
		}
		// the delete event: enqueue, hand out, sync (NotFound -> forget)
		c.enqueue(key, TriggerEvent)
		got, _ := c.queue.Get()
		tr := c.takeTrigger(got, c.clock.Now())
		_, _ = c.sync(ctx, got)
		c.queue.Done(got)
		c.fair.finished(got)
		_ = tr
	}
	c.mu.Lock()
	n := len(c.triggers)
	var sample []string
	for k, m := range c.triggers {
		for tr, p := range m {
			if len(sample) < 2 {
				sample = append(sample, fmt.Sprintf("%s %s due %s", k, tr, p.due.Format(time.RFC3339)))
			}
		}
	}
	c.mu.Unlock()
	t.Logf("deleted resources still holding recorded triggers: %d of %d; e.g. %v", n, len(vrs), sample)
}

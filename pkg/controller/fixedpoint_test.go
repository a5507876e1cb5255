// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// The status a repair writes is a fixed point: the same process's next
// reconcile, with nothing changed, writes nothing. The drift history it
// remembers must equal the history's round trip through the API server,
// which keeps whole seconds.
func TestReconcileAfterARepairWritesNothing(t *testing.T) {
	vr := newVR(operatorNS, "steady", configMapManifest, reportedInSync)
	f := newFixture(t, []*v1alpha1.VidraResource{vr})
	// Deleted when the clock is not on a whole second, as real clocks are.
	f.clock.SetTime(time.Date(2025, 1, 1, 0, 0, 0, 123456789, time.UTC))
	key := cache.MetaObjectToName(vr)
	if _, err := f.run(key); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	repaired := slices.Clone(f.actions)
	written := f.statuses[len(f.statuses)-1]
	f.actions, f.statuses = nil, nil
	f.mu.Unlock()
	if len(written.DriftHistory) != 1 || !written.DriftHistory[0].Deleted {
		t.Fatalf("the repair (%q) recorded drift history %+v, want the deleted ConfigMap", repaired, written.DriftHistory)
	}

	// The restored object is live, and the informer holds the status the
	// repair wrote, as the API server returned it.
	if err := f.dynamic.Tracker().Add(liveApp(operatorNS, vr)); err != nil {
		t.Fatal(err)
	}
	next := vr.DeepCopy()
	next.Status, next.ResourceVersion = written, "8"
	if err := f.c.indexer.Update(next); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(10 * time.Second)
	if _, err := f.c.sync(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.statuses) > 0 {
		t.Errorf("the reconcile after the repair wrote the status again (%q):\nbefore %+v\nafter  %+v", f.actions, written.DriftHistory, f.statuses[0].DriftHistory)
	}
}

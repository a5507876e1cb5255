package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// A change that its dependencies hold back is not waited on for health
// yet: the previous generation's healthCheckStartTime goes, so that the wait
// starts when the change is applied, however long it was held.
func TestBlockedChangeDropsThePreviousWaitsStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// observed is the generation the resource's status reports.
		observed  int64
		wantStart bool
	}{
		{name: "a new generation held back drops the start", observed: 1, wantStart: false},
		{name: "the generation already held back keeps what it has", observed: 2, wantStart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vr := newVR(operatorNS, "dependent", configMapManifest, func(vr *v1alpha1.VidraResource) {
				vr.Generation = 2
				vr.Spec.Wait = true
				vr.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "missing"}}
				start := metav1.NewTime(time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC))
				vr.Status.ObservedGeneration = tc.observed
				vr.Status.HealthCheckStartTime = &start
			})
			f := newFixture(t, []*v1alpha1.VidraResource{vr})

			if _, err := f.run(cache.MetaObjectToName(vr)); err != nil {
				t.Fatalf("sync: %v", err)
			}
			f.mu.Lock()
			statuses := f.statuses
			f.mu.Unlock()
			if len(statuses) != 1 {
				t.Fatalf("%d status writes, want 1", len(statuses))
			}
			st := statuses[0]
			if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonDependencyNotReady {
				t.Errorf("Ready = %+v, want reason %s", c, v1alpha1.ReasonDependencyNotReady)
			}
			if got := st.HealthCheckStartTime != nil; got != tc.wantStart {
				t.Errorf("healthCheckStartTime = %v, want it kept: %v", st.HealthCheckStartTime, tc.wantStart)
			}
		})
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// An object whose apply policy becomes Ignore is no longer compared with
// the manifest: the drift reported of it before is forgotten, where it
// stayed in status.drift, the resource Drifted, for ever.
func TestDriftOfAnObjectLeftAloneIsForgotten(t *testing.T) {
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  annotations:\n    " +
		v1alpha1.ApplyPolicyAnnotation + ": Ignore\ndata:\n  key: value\n"
	seen := metav1.NewTime(time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC))
	vr := newVR(operatorNS, "web", manifest, reportedInSync, func(vr *v1alpha1.VidraResource) {
		vr.Spec.DriftPolicy = v1alpha1.DriftPolicyReport
		vr.Status.Drift = []v1alpha1.DriftRecord{{
			APIVersion: "v1", Kind: "ConfigMap", Namespace: operatorNS, Name: "app",
			Fields: []string{"/data/key"}, Manager: "kubectl-edit", Time: seen,
		}}
		meta.SetStatusCondition(&vr.Status.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionDrifted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonDriftDetected,
			Message: "1 object differs from the manifest", ObservedGeneration: vr.Generation, LastTransitionTime: seen,
		})
	})
	live := liveApp(operatorNS, vr)
	live.Object["data"] = map[string]any{"key": "edited"}
	f := newFixture(t, []*v1alpha1.VidraResource{vr}, live)
	if _, err := f.run(cache.MetaObjectToName(vr)); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.statuses) == 0 {
		t.Fatal("no status written")
	}
	st := f.statuses[len(f.statuses)-1]
	if len(st.Drift) > 0 {
		t.Errorf("status.drift = %+v, want nothing: the object is left alone", st.Drift)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDrifted); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Drifted condition %+v, want False", c)
	}
}

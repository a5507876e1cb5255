// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// An object whose apply policy becomes Ignore is no longer compared with
// the manifest: the drift reported of it before is forgotten, where it
// stayed in status.drift, the resource Drifted, for ever.
func TestDriftOfAnObjectLeftAloneIsForgotten(t *testing.T) {
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  annotations:\n    " +
		v1alpha1.ApplyPolicyAnnotation + ": Ignore\ndata:\n  key: value\n"
	seen := metav1.NewTime(time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC))
	vr := engineVR("web", manifest, inSyncStatus, func(vr *v1alpha1.VidraResource) {
		vr.Spec.DriftPolicy = v1alpha1.DriftPolicyReport
		vr.Status.Drift = []v1alpha1.DriftRecord{{
			APIVersion: "v1", Kind: "ConfigMap", Namespace: engineNS, Name: "app",
			Fields: []string{"/data/key"}, Manager: "kubectl-edit", Time: seen,
		}}
	})
	live := appObject(vr)
	live.Object["data"] = map[string]any{"key": "edited"}
	f := newEngineFixture(t, []*v1alpha1.VidraResource{vr}, live)
	pass := f.apply(vr)
	if len(pass.Out.Errs) > 0 {
		t.Fatalf("errors %v", pass.Out.Errs)
	}
	if len(pass.Out.Drift) > 0 {
		t.Errorf("drift %+v, want nothing: the object is left alone", pass.Out.Drift)
	}
}

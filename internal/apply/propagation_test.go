// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// An object that leaves the manifest is deleted with the propagation
// spec.deletionPropagation asks for: in the background unless it asks for
// the foreground.
func TestPruneDeletesWithTheResourcesPropagation(t *testing.T) {
	for _, c := range []struct {
		spec v1alpha1.DeletionPropagation
		want metav1.DeletionPropagation
	}{
		{"", metav1.DeletePropagationBackground},
		{v1alpha1.DeletionPropagationBackground, metav1.DeletePropagationBackground},
		{v1alpha1.DeletionPropagationForeground, metav1.DeletePropagationForeground},
	} {
		t.Run(string(c.want)+" for "+string(c.spec), func(t *testing.T) {
			owner := engineVR("owner", otherManifest, inSyncStatus, func(vr *v1alpha1.VidraResource) { vr.Spec.DeletionPropagation = c.spec })
			f := newEngineFixture(t, []*v1alpha1.VidraResource{owner})
			u := appObject(owner)
			if err := f.meta.Tracker().Add(&metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Namespace: engineNS, Name: "app", UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
					Labels: u.GetLabels(), Annotations: u.GetAnnotations(), ManagedFields: u.GetManagedFields()}}); err != nil {
				t.Fatal(err)
			}
			var got []metav1.DeletionPropagation
			f.meta.PrependReactor("delete", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if p := a.(k8stesting.DeleteAction).GetDeleteOptions().PropagationPolicy; p != nil {
					got = append(got, *p)
				}
				return false, nil, nil
			})
			pass := f.apply(owner)
			if len(pass.Out.Pruned) != 1 || len(got) != 1 || got[0] != c.want {
				t.Errorf("pruned %v with propagation %v, want ConfigMap app with %s (requests %v)", pass.Out.Pruned, got, c.want, f.requests())
			}
		})
	}
}

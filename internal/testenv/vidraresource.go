// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

// CreateVR creates VidraResource ns/name holding manifest, after mutate,
// and fails the test if the API server refuses it.
func CreateVR(t testing.TB, cs versioned.Interface, ns, name, manifest string, mutate ...func(*v1alpha1.VidraResource)) *v1alpha1.VidraResource {
	t.Helper()
	vr := &v1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.VidraResourceSpec{Manifest: manifest},
	}
	for _, m := range mutate {
		m(vr)
	}
	out, err := cs.InfrahubV1alpha1().VidraResources(ns).Create(t.Context(), vr, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// UpdateVR applies mutate to the current VidraResource ns/name, retrying
// on conflicts: the operator writes its status meanwhile.
func UpdateVR(t testing.TB, cs versioned.Interface, ns, name string, mutate func(*v1alpha1.VidraResource)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		vr, err := cs.InfrahubV1alpha1().VidraResources(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		mutate(vr)
		_, err = cs.InfrahubV1alpha1().VidraResources(ns).Update(ctx, vr, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// WaitVR polls VidraResource ns/name until cond holds, failing after a
// minute with the status it last saw.
func WaitVR(t testing.TB, cs versioned.Interface, ns, name, what string, cond func(*v1alpha1.VidraResource) bool) *v1alpha1.VidraResource {
	t.Helper()
	var last *v1alpha1.VidraResource
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		vr, err := cs.InfrahubV1alpha1().VidraResources(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = vr
		return cond(vr), nil
	})
	if err != nil {
		var status any
		if last != nil {
			status = last.Status
		}
		t.Fatalf("VidraResource %s/%s never %s: %v\nlast status: %+v", ns, name, what, err, status)
	}
	return last
}

// HasCondition matches a VidraResource whose condition typ, of the current
// generation, has status and reason.
func HasCondition(typ string, status metav1.ConditionStatus, reason string) func(*v1alpha1.VidraResource) bool {
	return func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, typ)
		return c != nil && c.Status == status && c.Reason == reason && vr.Status.ObservedGeneration == vr.Generation
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/cachecharge"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// The marks a stub keeps: what ownerOf needs to wake its owner.
var (
	stubLabels      = []string{v1alpha1.ManagedByLabel, v1alpha1.OwnerUIDLabel, v1alpha1.BucketLabel}
	stubAnnotations = []string{v1alpha1.OwnedByAnnotation}
)

// charge is the watch registry's Options.Charge: an object Keep kept (its
// marks name a live VidraResource) is held in full, charged to its owner's
// namespace, only when that owner deploys to the object's cluster and
// declares it (cachecharge.Decide).
func (w *Wakes) charge(ref watchregistry.Ref, u *unstructured.Unstructured) watchregistry.Charge {
	var o cachecharge.Object
	if vr, ok := apply.MarkedOwner(w.lister, u); ok {
		o.OwnerNamespace = vr.Namespace
		o.DeploysHere, o.Declared = w.index.Declares(vr, ref.Cluster, ref.GVR, u)
	}
	d := cachecharge.Decide(o)
	ch := watchregistry.Charge{Stub: d.Stub, Labels: stubLabels, Annotations: stubAnnotations}
	if !d.Stub {
		ch.Budget = w.budgets.For(d.Namespace)
	}
	return ch
}

// setCacheLimited sets the CacheLimited condition while the namespace of
// vr is past its cache budget, and removes it otherwise: every resource of
// the namespace carries it, those of other namespaces never do.
func (c *Controller) setCacheLimited(vr *v1alpha1.VidraResource, st *v1alpha1.VidraResourceStatus, now metav1.Time) {
	msg, over := c.budgets.Exceeded(vr.Namespace)
	if !over {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionCacheLimited)
		return
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionCacheLimited, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonCacheBudgetExceeded,
		Message: truncate(msg), ObservedGeneration: vr.Generation, LastTransitionTime: now,
	})
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// A deleted CustomResourceDefinition is held by the API server's own
// finalizer, crdCleanupFinalizer, until its custom resources are deleted.
// The controller behind it retries a failed attempt with exponential
// backoff (5 ms doubling to 1,000 s), and is otherwise requeued only by a
// change to the CRD other than its own Terminating condition. A CRD
// deleted seconds after its creation makes its attempts fail for a moment
// ("could not list instances: storage is (re)initializing": the watch
// cache of its custom resources is not ready yet), and a burst of such
// failures can put the next attempt many minutes away, although it would
// now succeed: a bundle's deletion then waits that long for nothing. So a
// deletion that waits for such a CRD writes an annotation on it, which
// requeues that controller at once. The annotation holds the time, so that
// whichever pass or replica looks writes it no more often than
// crdCleanupInterval allows.
const (
	crdCleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"
	// crdCleanupRequeueMin is how long a CRD is left to its cleanup before
	// the first requeue, and the least time between two.
	crdCleanupRequeueMin = 5 * time.Second
	// crdCleanupRequeueMax is the most time between two requeues: the work
	// queue's longest backoff.
	crdCleanupRequeueMax = 5 * time.Minute
)

// crdCleanupInterval is the time between two requeues of the cleanup of a
// CRD terminating for age: a quarter of that age, within
// [crdCleanupRequeueMin, crdCleanupRequeueMax]. A CRD whose custom
// resources truly take long to go (a finalizer of theirs holds one) costs
// a write every few minutes, not every few seconds.
func crdCleanupInterval(age time.Duration) time.Duration {
	return min(max(age/4, crdCleanupRequeueMin), crdCleanupRequeueMax)
}

// crdCleanupWait reports whether live, the object of key, is a CRD held by
// the API server's cleanup (held), and how long until its cleanup is due
// for a requeue at now (0: it is due). A requeue time that cannot be read,
// or that lies ahead, does not hold the next one back: anyone who may
// annotate the CRD could otherwise put it off for ever.
func crdCleanupWait(key ObjectKey, live metav1.Object, now time.Time) (wait time.Duration, held bool) {
	if key.group != "apiextensions.k8s.io" || key.kind != "CustomResourceDefinition" {
		return 0, false
	}
	deleted := live.GetDeletionTimestamp()
	if deleted == nil || !slices.Contains(live.GetFinalizers(), crdCleanupFinalizer) {
		return 0, false
	}
	age := now.Sub(deleted.Time)
	if age < crdCleanupRequeueMin {
		return crdCleanupRequeueMin - age, true
	}
	last, err := time.Parse(time.RFC3339, live.GetAnnotations()[v1alpha1.CleanupRequeuedAtAnnotation])
	if err != nil || last.After(now) {
		return 0, true
	}
	return max(0, crdCleanupInterval(age)-now.Sub(last)), true
}

// requeueCRDCleanup requeues the API server's cleanup of h, an object of
// vr's that it deleted and that is not gone, when it is a CRD whose cleanup
// is due (crdCleanupWait), and records in vr's state when the next try of
// its deletion is due.
func (e *Engine) requeueCRDCleanup(ctx context.Context, logger klog.Logger, vr *v1alpha1.VidraResource, h *held, key ObjectKey) {
	now := e.clock.Now()
	wait, isHeld := crdCleanupWait(key, h.live, now)
	if !isHeld {
		return
	}
	if wait == 0 {
		wait = e.requeueCleanupOf(ctx, logger, h, now)
	}
	if st := e.stateFor(cache.MetaObjectToName(vr), vr.UID); wait > 0 && (st.cleanupRecheck == 0 || wait < st.cleanupRecheck) {
		st.cleanupRecheck = wait
	}
}

// requeueCleanupOf writes the requeue annotation on h at now, and returns
// when the next requeue is due. A failed write is logged and returns 0:
// the deletion then comes back with the work queue's backoff, so that an
// identity that may not patch the CRD does not write every few seconds
// for as long as the CRD is held.
func (e *Engine) requeueCleanupOf(ctx context.Context, logger klog.Logger, h *held, now time.Time) time.Duration {
	age := now.Sub(h.live.GetDeletionTimestamp().Time)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{v1alpha1.CleanupRequeuedAtAnnotation: now.UTC().Format(time.RFC3339)},
	}})
	if err != nil {
		return 0
	}
	w := e.registry.BeginWrite(h.ref, h.live)
	resp, err := h.client.Patch(ctx, h.live.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.CleanupFieldManager})
	w.End(resp, err)
	if err != nil {
		logger.V(2).Info("Requeueing the API server's cleanup of a deleted CRD failed; the next try writes again", "err", err)
		return 0
	}
	next := crdCleanupInterval(age)
	logger.Info("Requeued the API server's cleanup of a deleted CRD", "terminatingFor", age.Round(time.Second), "next", next)
	return next
}

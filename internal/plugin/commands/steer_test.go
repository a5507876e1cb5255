// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned/fake"
)

func waitedResource() *v1alpha1.VidraResource {
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"}}
	vr.Status.LastHandledReconcileAt = "2026-01-01T00:00:00Z"
	return vr
}

// A person who may patch a resource but not list or watch it is told so at
// once, not after the whole timeout, and not that the operator is down.
func TestWaitingWithoutTheRightToWatchFailsAtOnce(t *testing.T) {
	gr := schema.GroupResource{Group: v1alpha1.GroupName, Resource: "vidraresources"}
	for _, verb := range []string{"list", "watch"} {
		t.Run(verb, func(t *testing.T) {
			vr := waitedResource()
			cs := fake.NewClientset(vr)
			cs.PrependReactor(verb, "vidraresources", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(gr, "", nil)
			})
			cs.PrependWatchReactor("vidraresources", func(k8stesting.Action) (bool, watch.Interface, error) {
				if verb == "watch" {
					return true, nil, apierrors.NewForbidden(gr, "", nil)
				}
				return false, nil, nil
			})
			// The timeout is the test's own bound: without the refusal
			// ending the wait, it ends here with the operator blamed.
			_, err := waitHandled(t.Context(), &clients{vidra: cs}, vr, "2026-11-28T00:00:00Z", 30*time.Second)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), verb+" vidraresource team-a/web") {
				t.Fatalf("error %v, want the %s's refusal", err, verb)
			}
		})
	}
}

// A wait that times out says so in its own words, with the last request
// handled and the last error met, not in the watch's generic ones.
func TestAWaitThatTimesOutSaysWhatItWaitedFor(t *testing.T) {
	t.Run("nothing failed", func(t *testing.T) {
		vr := waitedResource()
		_, err := waitHandled(t.Context(), &clients{vidra: fake.NewClientset(vr)}, vr, "2026-11-28T00:00:00Z", 100*time.Millisecond)
		want := "the operator did not handle the request within 100ms (it handled one last at 2026-01-01T00:00:00Z): is it running, and does it watch namespace team-a?"
		if err == nil || err.Error() != want {
			t.Fatalf("error %v, want %q", err, want)
		}
	})
	t.Run("a list failed", func(t *testing.T) {
		vr := waitedResource()
		cs := fake.NewClientset(vr)
		cs.PrependReactor("list", "vidraresources", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInternalError(context.DeadlineExceeded)
		})
		_, err := waitHandled(t.Context(), &clients{vidra: cs}, vr, "2026-11-28T00:00:00Z", 500*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "did not handle the request within 500ms (it handled one never)") || !apierrors.IsInternalError(err) {
			t.Fatalf("error %v, want the timeout and the list's error", err)
		}
	})
}

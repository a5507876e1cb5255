// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// reconcileUntilForbidden plays an owner reconciled as the README used to
// say: Track, then Get, then switch on the error, ErrNotSynced first
// (return and wait to be woken). It reconciles once, then on every Enqueue,
// and returns the first error that is not ErrNotSynced alone. Before the
// fix it stalled: each Track restarted the failed informer, Get said "not
// synced", and the repeated failure woke nobody.
func reconcileUntilForbidden(t *testing.T, dyn dynamic.Interface, ref watchregistry.Ref) error {
	t.Helper()
	wake := make(chan watchregistry.Event, 64)
	r, err := watchregistry.New(watchregistry.Options[string]{
		Map:         func(watchregistry.Event) []string { return nil },
		Enqueue:     func(_ string, ev watchregistry.Event) { wake <- ev },
		RetryFailed: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.SetCluster("", dyn, nil)
	run(t, r)

	reconcile := func() (error, bool) {
		if err := r.Track("owner", []watchregistry.Ref{ref}); err != nil {
			t.Fatal(err)
		}
		_, err := r.Get(ref, ref.Namespace, "any")
		switch {
		case errors.Is(err, watchregistry.ErrNotSynced) && !errors.Is(err, watchregistry.ErrForbidden):
			return nil, false
		case errors.Is(err, watchregistry.ErrNotSynced):
			// The joined error of a retry: the README's order would wait
			// here, and the failure that follows wakes the owner.
			return nil, false
		}
		return err, true
	}
	if err, done := reconcile(); done {
		return err
	}
	deadline := time.After(waitFor)
	for reconciles := 1; ; reconciles++ {
		select {
		case ev := <-wake:
			if ev.Type == watchregistry.EventStateChanged && !errors.Is(ev.Err, watchregistry.ErrForbidden) {
				t.Errorf("EventStateChanged carries %v, want an error matching ErrForbidden", ev.Err)
			}
			if err, done := reconcile(); done {
				return err
			}
		case <-deadline:
			t.Fatalf("stalled: after %d reconciles the owner still reads ErrNotSynced and is not woken; state %s", reconciles, r.State(ref))
			return nil
		}
	}
}

func TestOwnerWithoutListAccessSeesForbiddenRatherThanStall(t *testing.T) {
	admin := newClients(t, controlPlane(t))
	ns := newNamespace(t, admin.cs)
	cfg := rest.CopyConfig(controlPlane(t))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "no-list-" + ns}
	err := reconcileUntilForbidden(t, newClients(t, cfg).dyn, watchregistry.Ref{GVR: secrets, Namespace: ns})
	if !errors.Is(err, watchregistry.ErrForbidden) || !apierrors.IsForbidden(err) {
		t.Fatalf("Get: %v, want ErrForbidden wrapping the API's Forbidden", err)
	}
}

func TestOwnerWithoutListAccessSeesForbiddenWithTheFakeClient(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{secrets: "SecretList"})
	dyn.PrependReactor("list", "secrets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "", errors.New("no list for you"))
	})
	err := reconcileUntilForbidden(t, dyn, watchregistry.Ref{GVR: secrets, Namespace: "team-a"})
	if !errors.Is(err, watchregistry.ErrForbidden) {
		t.Fatalf("Get: %v, want ErrForbidden", err)
	}
}

func TestGetOfARetryingRefJoinsTheLastErrorWithNotSynced(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{secrets: "SecretList"})
	release := make(chan struct{})
	calls := make(chan struct{}, 16)
	dyn.PrependReactor("list", "secrets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		calls <- struct{}{}
		if len(calls) > 1 {
			<-release // the retry's list hangs: its ref stays Pending
		}
		return true, nil, apierrors.NewForbidden(a.GetResource().GroupResource(), "", errors.New("no list for you"))
	})
	defer close(release)
	rec := &recorder{}
	r, err := watchregistry.New(watchregistry.Options[string]{Map: testMap, Enqueue: rec.enqueue})
	if err != nil {
		t.Fatal(err)
	}
	r.SetCluster("", dyn, nil)
	run(t, r)
	ref := watchregistry.Ref{GVR: secrets, Namespace: "team-a"}
	track(t, r, "owner", ref)
	waitState(t, r, ref, watchregistry.StateForbidden)

	// Within the backoff, Track starts nothing: the failure stands.
	track(t, r, "owner", ref)
	if _, err := r.Get(ref, "team-a", "any"); !errors.Is(err, watchregistry.ErrForbidden) || errors.Is(err, watchregistry.ErrNotSynced) {
		t.Fatalf("Get within the backoff: %v, want ErrForbidden alone", err)
	}
	if len(calls) != 1 {
		t.Fatalf("%d lists within the backoff, want 1", len(calls))
	}
	// Past it, Track retries; until the retry lists, Get says both.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for len(calls) < 2 {
		track(t, r, "owner", ref)
		select {
		case <-ctx.Done():
			t.Fatal("Track did not retry after the backoff")
		case <-time.After(50 * time.Millisecond):
		}
	}
	_, err = r.Get(ref, "team-a", "any")
	if !errors.Is(err, watchregistry.ErrNotSynced) || !errors.Is(err, watchregistry.ErrForbidden) || !apierrors.IsForbidden(err) {
		t.Fatalf("Get of the retrying ref: %v, want ErrNotSynced joined with the last ErrForbidden", err)
	}
}

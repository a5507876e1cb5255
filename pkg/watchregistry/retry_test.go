// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

func TestForbiddenRefRetriesByItselfWithRetryFailed(t *testing.T) {
	admin := newClients(t, controlPlane(t))
	ns := newNamespace(t, admin.cs)
	user := "retrier-" + ns
	cfg := rest.CopyConfig(controlPlane(t))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c := newClients(t, cfg)
	clk := testingclock.NewFakeClock(time.Now())
	rec := &recorder{}
	r := startRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue, RetryFailed: true, RetryMaxDelay: time.Minute, Clock: clk})
	secs := watchregistry.Ref{GVR: secrets, Namespace: ns}
	ctx := context.Background()

	// WaitForSync waits through the failures until access is granted.
	synced := make(chan error, 1)
	track(t, r, "owner", secs)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, waitFor)
		defer cancel()
		synced <- r.WaitForSync(ctx, secs)
	}()
	waitState(t, r, secs, watchregistry.StateForbidden)
	snap, _ := r.Snapshot(secs)
	if snap.NextRetry.IsZero() || !errors.Is(snap.LastError, watchregistry.ErrForbidden) {
		t.Fatalf("snapshot of a Forbidden ref: %+v, want a retry scheduled and the error", snap)
	}

	// A retry that fails the same way starts a fresh informer and tells
	// the owner again, with the error: it may have read ErrNotSynced from
	// the retry meanwhile. Nobody called Track.
	started := r.Stats().Started
	clk.Step(time.Second)
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		return r.Stats().Started > started && r.State(secs) == watchregistry.StateForbidden, nil
	})
	if err != nil {
		t.Fatalf("no retry after the first backoff: %+v", r.Stats())
	}
	rec.waitCount(t, "the owner told of the second failure", isType(watchregistry.EventStateChanged, "owner"), 2)
	if snap, _ := r.Snapshot(secs); snap.NextRetry.Sub(clk.Now()) != 2*time.Second {
		t.Fatalf("second retry in %s, want 2s (doubled)", snap.NextRetry.Sub(clk.Now()))
	}

	grant(t, admin, ns, user, "secrets")
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		clk.Step(time.Minute)
		return r.State(secs) == watchregistry.StateSynced, nil
	})
	if err != nil {
		t.Fatalf("Forbidden ref did not recover by itself after the grant: %s", r.State(secs))
	}
	if err := <-synced; err != nil {
		t.Fatalf("WaitForSync: %v", err)
	}
	rec.waitAfter(t, 0, "EventInitialList of the recovered ref", isType(watchregistry.EventInitialList, "owner"))
	checkInvariants(t, r)
}

func TestWaitForSyncReportsTheTerminalErrorWithoutRetries(t *testing.T) {
	admin := newClients(t, controlPlane(t))
	ns := newNamespace(t, admin.cs)
	cfg := rest.CopyConfig(controlPlane(t))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "nobody-" + ns}
	r := startRegistry(t, newClients(t, cfg), watchregistry.Options[string]{Enqueue: (&recorder{}).enqueue})
	secs := watchregistry.Ref{GVR: secrets, Namespace: ns}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := r.WaitForSync(ctx, secs); !errors.Is(err, watchregistry.ErrNotTracked) {
		t.Fatalf("WaitForSync of an untracked ref: %v, want ErrNotTracked", err)
	}
	track(t, r, "owner", secs)
	if err := r.WaitForSync(ctx, secs); !errors.Is(err, watchregistry.ErrForbidden) {
		t.Fatalf("WaitForSync of a forbidden ref: %v, want ErrForbidden", err)
	}
	short, cancelShort := context.WithCancel(ctx)
	cancelShort()
	track(t, r, "owner", watchregistry.Ref{GVR: configMaps, Namespace: ns})
	if err := r.WaitForSync(short, watchregistry.Ref{GVR: configMaps, Namespace: ns}); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitForSync with a cancelled context: %v, want nil or context.Canceled", err)
	}
}

func TestTrackRejectsANamespaceOnAClusterScopedResource(t *testing.T) {
	c := newClients(t, controlPlane(t))
	namespaces := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	var asked []schema.GroupVersionResource
	r := newRegistry(t, c, watchregistry.Options[string]{
		Enqueue: (&recorder{}).enqueue,
		IsNamespaced: func(cluster string, gvr schema.GroupVersionResource) (bool, error) {
			asked = append(asked, gvr)
			return gvr != namespaces, nil
		},
	})
	cms := watchregistry.Ref{GVR: configMaps, Namespace: "team-a"}
	track(t, r, "owner", cms)
	err := r.Track("owner", []watchregistry.Ref{cms, {GVR: namespaces, Namespace: "team-a"}})
	if !errors.Is(err, watchregistry.ErrClusterScoped) {
		t.Fatalf("Track of a namespaced ref of namespaces: %v, want ErrClusterScoped", err)
	}
	if st := r.State(watchregistry.Ref{GVR: namespaces, Namespace: "team-a"}); st != watchregistry.StateNotTracked {
		t.Fatalf("state after the failed Track: %s", st)
	}
	if refs := r.Refs("owner"); len(refs) != 1 || refs[0] != cms {
		t.Fatalf("refs after the failed Track: %v, want the previous set", refs)
	}
	// Cluster-scoped resources are tracked with no namespace; refs already
	// tracked are not asked about again.
	track(t, r, "owner", cms, watchregistry.Ref{GVR: namespaces})
	if len(asked) != 2 {
		t.Fatalf("IsNamespaced asked about %v, want configmaps then namespaces once each", asked)
	}
}

func TestStartDoesNotBlockAndRunsOnce(t *testing.T) {
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	r := newRegistry(t, c, watchregistry.Options[string]{Enqueue: (&recorder{}).enqueue})
	ref := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	track(t, r, "owner", ref)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err == nil {
		t.Fatal("a second Start succeeded")
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, waitFor)
	defer waitCancel()
	if err := r.WaitForSync(waitCtx, ref); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-r.Done():
	case <-time.After(waitFor):
		t.Fatal("Done not closed after the context ended")
	}
	if s := r.Stats(); s.Running != 0 {
		t.Fatalf("%d informers running after Done", s.Running)
	}
}

// TestWaitForSyncOfARetryingRefReturnsOnceASyncedInformerServesIt waits
// for a namespaced ref whose informer was refused and waits for its retry,
// while an all-namespaces informer of the same resource syncs and the
// ref's owner tracks it again: whichever moves the ref to the synced
// informer must end the wait, though no informer changed state then.
func TestWaitForSyncOfARetryingRefReturnsOnceASyncedInformerServesIt(t *testing.T) {
	admin := newClients(t, controlPlane(t))
	ns := newNamespace(t, admin.cs)
	deny := &refuser{path: "/api/v1/namespaces/" + ns + "/configmaps"}
	deny.on.Store(true)
	c := newClients(t, deny.wrap(controlPlane(t)))
	// The fake clock never moves: the ref's own retry never comes.
	clk := testingclock.NewFakeClock(time.Now())
	r := newRegistry(t, c, watchregistry.Options[string]{Enqueue: (&recorder{}).enqueue, RetryFailed: true, Clock: clk})
	narrow := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	wide := watchregistry.Ref{GVR: configMaps}
	// The owner tracks the ref again once the all-namespaces informer has
	// synced, right after WaitForSync has read the ref's state and before
	// it waits: only Track can wake it then.
	var tracked atomic.Bool
	watchregistry.OnWaiting(r, func(ref watchregistry.Ref) {
		if ref == narrow && r.State(wide) == watchregistry.StateSynced && tracked.CompareAndSwap(false, true) {
			if err := r.Track("owner-n", []watchregistry.Ref{narrow}); err != nil {
				t.Error(err)
			}
		}
	})
	run(t, r)

	track(t, r, "owner-n", narrow)
	waitState(t, r, narrow, watchregistry.StateForbidden)
	synced := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		synced <- r.WaitForSync(ctx, narrow)
	}()
	deny.on.Store(false)
	track(t, r, "owner-w", wide)
	if err := <-synced; err != nil {
		t.Fatalf("WaitForSync of a ref a synced informer serves: %v", err)
	}
	if snap, _ := r.Snapshot(narrow); snap.ServedBy != wide || snap.State != watchregistry.StateSynced {
		t.Fatalf("snapshot: %+v, want Synced, served by %s", snap, wide)
	}
	checkInvariants(t, r)
}

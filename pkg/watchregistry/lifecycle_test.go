// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
	"github.com/vidra-operator/vidra/pkg/watchregistry/controlplane"
)

func TestOwnersSharingAGVRShareOneInformerThatStopsAfterLinger(t *testing.T) {
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	rec := &recorder{}
	// The linger runs on the registry's clock, which moves only when the
	// test steps it.
	const linger = 200 * time.Millisecond
	clk := testingclock.NewFakeClock(time.Now())
	r := startRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue, Linger: linger, Clock: clk})
	ref := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	// The marker's informer is left a step before ref's: once it has
	// stopped, the registry has handled the time the clock reads.
	marker := watchregistry.Ref{GVR: secrets, Namespace: ns}

	// Warm up once, so that the baseline includes the HTTP/2 connection and
	// client-go's lazily started goroutines.
	track(t, r, "warm-up", ref, marker)
	waitState(t, r, ref, watchregistry.StateSynced)
	waitState(t, r, marker, watchregistry.StateSynced)
	r.Forget("warm-up")
	clk.Step(linger)
	waitState(t, r, ref, watchregistry.StateNotTracked)
	waitState(t, r, marker, watchregistry.StateNotTracked)
	waitRunning(t, r, 0)
	base := runtime.NumGoroutine()
	started := r.Stats().Started

	track(t, r, "a", ref)
	track(t, r, "b", ref)
	waitState(t, r, ref, watchregistry.StateSynced)
	s := r.Stats()
	if got := s.Started - started; got != 1 {
		t.Fatalf("informers started for two owners of one ref: %d, want 1", got)
	}
	if s.Informers[watchregistry.StateSynced] != 1 || s.Owners != 2 {
		t.Fatalf("stats: %+v, want one synced informer and two owners", s)
	}
	track(t, r, "marker", marker)
	waitState(t, r, marker, watchregistry.StateSynced)

	r.Forget("a")
	if r.State(ref) != watchregistry.StateSynced {
		t.Fatalf("state after one of two owners left: %s, want Synced", r.State(ref))
	}
	r.Forget("marker")
	clk.Step(time.Millisecond)
	r.Forget("b")
	// It lingers: it is still there right after the last owner left...
	if st := r.State(ref); st != watchregistry.StateSynced {
		t.Fatalf("state right after the last owner left: %s, want Synced (lingering)", st)
	}
	// ...and just under the linger later, when the marker's is over...
	clk.Step(linger - time.Millisecond)
	waitState(t, r, marker, watchregistry.StateNotTracked)
	if st := r.State(ref); st != watchregistry.StateSynced {
		t.Fatalf("state %s after its last owner left, just under the linger of %s: want Synced (lingering)", st, linger)
	}
	// ...and stops once the linger has passed.
	clk.Step(time.Millisecond)
	waitState(t, r, ref, watchregistry.StateNotTracked)
	waitRunning(t, r, 0)
	waitGoroutines(t, base, 2)
}

func TestTrackForgetCyclesLeakNothing(t *testing.T) {
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	rec := &recorder{}
	r := startRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue, Linger: 20 * time.Millisecond})
	refs := []watchregistry.Ref{
		{GVR: configMaps, Namespace: ns},
		{GVR: secrets, Namespace: ns},
		{GVR: configMaps, Namespace: "default"},
	}
	track(t, r, "warm-up", refs...)
	for _, ref := range refs {
		waitState(t, r, ref, watchregistry.StateSynced)
	}
	r.Forget("warm-up")
	waitRunning(t, r, 0)
	base := runtime.NumGoroutine()

	for i := range 10 {
		// Add, re-add (a subset) and remove, waiting for the sync each time so
		// that every cycle runs informers for real.
		track(t, r, "owner", refs...)
		for _, ref := range refs {
			waitState(t, r, ref, watchregistry.StateSynced)
		}
		track(t, r, "owner", refs[i%len(refs)])
		r.Forget("owner")
		waitRunning(t, r, 0)
	}
	if s := r.Stats(); s.Owners != 0 || len(nonZero(s.Informers)) != 0 {
		t.Fatalf("after the cycles: %+v, want no owners and no informers", s)
	}
	waitGoroutines(t, base, 2)
}

func TestDeletedCRDIsGoneWithoutRetriesAndRecoversWhenTrackedAgain(t *testing.T) {
	admin := newClients(t, controlPlane(t))
	ns := newNamespace(t, admin.cs)
	gvr := crd(t, admin, "gone.watchregistry.test", "Widget", false)
	lists := &requestCounter{resource: gvr.Resource}
	c := newClients(t, lists.wrap(controlPlane(t)))
	rec := &recorder{}
	r := startRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue})
	ref := watchregistry.Ref{GVR: gvr, Namespace: ns}
	ctx := context.Background()

	if _, err := c.dyn.Resource(gvr).Namespace(ns).Create(ctx, customResource(gvr, "Widget", ns, "w1", "owner"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	track(t, r, "owner", ref)
	waitState(t, r, ref, watchregistry.StateSynced)
	started := r.Stats().Started

	pos := rec.mark()
	deleteCRD(t, admin, gvr.Resource+"."+gvr.Group)
	rec.waitAfter(t, pos, "the custom resource's delete", isEvent(watchregistry.EventDeleted, "w1"))
	rec.waitAfter(t, pos, "EventStateChanged", isType(watchregistry.EventStateChanged, "owner"))
	waitState(t, r, ref, watchregistry.StateGone)
	if _, err := r.Get(ref, ns, "w1"); !errors.Is(err, watchregistry.ErrGone) || !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a Gone ref: %v, want ErrGone wrapping the API's NotFound", err)
	}

	// No endless retries: once its informer has ended, only a new informer
	// could list or watch the resource again.
	waitInformerEnded(t, r, ref, watchregistry.StateGone, 0, lists)
	settled := lists.n.Load()
	// The barrier: a later Track through the same registry, whose informer
	// has synced, is the one informer started since the CRD went.
	other := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	track(t, r, "other", other)
	waitState(t, r, other, watchregistry.StateSynced)
	if s := r.Stats(); s.Started != started+1 {
		t.Fatalf("informers started since the CRD went: %d, want 1 (the ConfigMaps')", s.Started-started)
	}
	if n := lists.n.Load(); n != settled {
		t.Fatalf("list/watch requests of a Gone resource: went from %d to %d", settled, n)
	}
	if st := r.State(ref); st != watchregistry.StateGone {
		t.Fatalf("state of the ref after the barrier: %s, want Gone", st)
	}

	// The CRD returns; tracking the ref again starts a fresh informer.
	crd(t, admin, "gone.watchregistry.test", "Widget", false)
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		if r.State(ref) == watchregistry.StateGone {
			track(t, r, "owner", ref)
		}
		return r.State(ref) == watchregistry.StateSynced, nil
	})
	if err != nil {
		t.Fatalf("ref did not recover after the CRD returned: %s", r.State(ref))
	}
	pos = rec.mark()
	if _, err := c.dyn.Resource(gvr).Namespace(ns).Create(ctx, customResource(gvr, "Widget", ns, "w2", "owner"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitAfter(t, pos, "the add of a new custom resource", isEvent(watchregistry.EventAdded, "w2"))
}

func TestForbiddenRefIsReportedWhileOthersWorkAndRecoversOnceGranted(t *testing.T) {
	admin := newClients(t, controlPlane(t))
	ns := newNamespace(t, admin.cs)
	ctx := context.Background()
	user := "tenant-" + ns
	grant(t, admin, ns, user, "configmaps")

	secretRequests := &requestCounter{resource: "secrets"}
	cfg := rest.CopyConfig(controlPlane(t))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c := newClients(t, secretRequests.wrap(cfg))
	rec := &recorder{}
	logs := &logSink{}
	r := startRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue, Logger: logs.logger()})
	cms := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	secs := watchregistry.Ref{GVR: secrets, Namespace: ns}

	track(t, r, "owner", cms, secs)
	waitState(t, r, secs, watchregistry.StateForbidden)
	waitState(t, r, cms, watchregistry.StateSynced)
	started := r.Stats().Started
	rec.waitAfter(t, 0, "EventStateChanged", isType(watchregistry.EventStateChanged, "owner"))
	_, err := r.Get(secs, ns, "any")
	if !errors.Is(err, watchregistry.ErrForbidden) || !apierrors.IsForbidden(err) {
		t.Fatalf("Get of a Forbidden ref: %v, want ErrForbidden wrapping the API's Forbidden", err)
	}
	if !logs.has(`"msg"="Informer stopped"`, `"gvr"="/v1, Resource=secrets"`, `"namespace"="`+ns+`"`, `"state"="Forbidden"`) {
		t.Fatalf("no log line for the stopped informer with its keys; logs:\n%s", logs)
	}

	// The forbidden informer does not retry on its own: once it has ended,
	// with the ConfigMaps' the one informer left running, only a new
	// informer could ask again.
	waitInformerEnded(t, r, secs, watchregistry.StateForbidden, 1, secretRequests)
	settled := secretRequests.n.Load()

	// The other GVR keeps working, and its event, delivered through the same
	// registry, is the barrier.
	pos := rec.mark()
	createConfigMap(t, admin.cs, configMap(ns, "still-watched", "owner", nil))
	rec.waitAfter(t, pos, "the add of a ConfigMap", isEvent(watchregistry.EventAdded, "still-watched"))
	if s := r.Stats(); s.Started != started {
		t.Fatalf("informers started since the ref became Forbidden: %d, want 0", s.Started-started)
	}
	if n := secretRequests.n.Load(); n != settled {
		t.Fatalf("list/watch requests of a Forbidden resource: went from %d to %d", settled, n)
	}

	// An owner that re-tracks on every reconcile starts nothing within the
	// backoff, and reads the failure, or it would list in a loop.
	before := secretRequests.n.Load()
	track(t, r, "owner", cms, secs)
	if st := r.State(secs); st != watchregistry.StateForbidden || secretRequests.n.Load() != before {
		t.Fatalf("Track within the backoff: state %s, %d requests; want Forbidden and none", st, secretRequests.n.Load()-before)
	}
	if _, err := r.Get(secs, ns, "any"); !errors.Is(err, watchregistry.ErrForbidden) {
		t.Fatalf("Get within the backoff: %v, want ErrForbidden", err)
	}

	// Access granted: tracking again recovers (RBAC takes a moment to apply,
	// as it would for a real operator, which retries on its interval).
	grant(t, admin, ns, user, "secrets")
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		if r.State(secs) == watchregistry.StateForbidden {
			track(t, r, "owner", cms, secs)
		}
		return r.State(secs) == watchregistry.StateSynced, nil
	})
	if err != nil {
		t.Fatalf("Forbidden ref did not recover after the grant: %s", r.State(secs))
	}
	rec.waitAfter(t, pos, "EventInitialList of the recovered ref", func(rec record) bool {
		return rec.ev.Type == watchregistry.EventInitialList && rec.ev.Ref == secs
	})
}

// grant lets user get, list and watch resource in ns.
func grant(t *testing.T, c clients, ns, user, resource string) {
	t.Helper()
	ctx := context.Background()
	name := "read-" + resource
	if _, err := c.cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitInformerEnded waits until the failed informer of ref can send no
// more requests, which is what proves, without a window, that it does not
// retry: the ref reports the failure with no retry scheduled (the one way
// the registry starts an informer by itself; Track, the other, is the
// test's), the informers running are down to the others' (its goroutines
// have exited) and no request of its resource is open.
func waitInformerEnded(t *testing.T, r *watchregistry.Registry[string], ref watchregistry.Ref, failed watchregistry.State, others int, reqs *requestCounter) {
	t.Helper()
	var snap watchregistry.RefSnapshot
	var running int
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		snap, _ = r.Snapshot(ref)
		running = r.Stats().Running
		// A retry is scheduled with the failure, under the same lock: a
		// failed ref without one has none coming.
		if snap.State == failed && !snap.NextRetry.IsZero() {
			return false, fmt.Errorf("a retry is scheduled at %s", snap.NextRetry)
		}
		return snap.State == failed && running == others && reqs.open.Load() == 0, nil
	})
	if err != nil {
		t.Fatalf("the %s informer of %s did not end: %v; state %s, %d informers running (want %d), %d requests of %s open",
			failed, ref, err, snap.State, running, others, reqs.open.Load(), reqs.resource)
	}
}

func waitRunning(t testing.TB, r *watchregistry.Registry[string], want int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		return r.Stats().Running == want, nil
	})
	if err != nil {
		buf := make([]byte, 1<<20)
		t.Fatalf("running informers: %d, want %d; stats %+v\n%s", r.Stats().Running, want, r.Stats(), buf[:runtime.Stack(buf, true)])
	}
}

func nonZero[K comparable](m map[K]int) map[K]int {
	out := map[K]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func TestClustersGetSeparateInformers(t *testing.T) {
	// First, so that -short skips before a second control plane starts.
	local := newClients(t, controlPlane(t))
	remoteEnv, err := controlplane.Start(context.Background(), controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remoteEnv.Stop)
	remote := newClients(t, remoteEnv.Config)
	ns := newNamespace(t, local.cs)
	if _, err := remote.cs.CoreV1().Namespaces().Create(context.Background(), nsObject(ns), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	rec := &recorder{}
	r := newRegistry(t, local, watchregistry.Options[string]{Enqueue: rec.enqueue})
	r.SetCluster("remote", remote.dyn, remote.md)
	run(t, r)
	localRef := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	remoteRef := watchregistry.Ref{Cluster: "remote", GVR: configMaps, Namespace: ns}
	track(t, r, "owner", localRef, remoteRef)
	waitState(t, r, localRef, watchregistry.StateSynced)
	waitState(t, r, remoteRef, watchregistry.StateSynced)
	if s := r.Stats(); s.Informers[watchregistry.StateSynced] != 2 || s.Started != 2 {
		t.Fatalf("stats: %+v, want two synced informers", s)
	}

	pos := rec.mark()
	createConfigMap(t, remote.cs, configMap(ns, "on-remote", "owner", nil))
	got := rec.waitAfter(t, pos, "the add on the remote cluster", isEvent(watchregistry.EventAdded, "on-remote"))
	if got.ev.Ref != remoteRef {
		t.Fatalf("event ref %s, want %s", got.ev.Ref, remoteRef)
	}
	if _, err := r.Get(remoteRef, ns, "on-remote"); err != nil {
		t.Fatalf("Get from the remote cache: %v", err)
	}
	if _, err := r.Get(localRef, ns, "on-remote"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get from the local cache: %v, want NotFound", err)
	}
}

func TestReplacingOrRemovingAClusterStopsItsInformersAndTellsOwners(t *testing.T) {
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	rec := &recorder{}
	r := newRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue})
	r.SetCluster("other", c.dyn, c.md)
	run(t, r)
	ref := watchregistry.Ref{Cluster: "other", GVR: configMaps, Namespace: ns}
	track(t, r, "owner", ref)
	waitState(t, r, ref, watchregistry.StateSynced)

	pos := rec.mark()
	r.SetCluster("other", c.dyn, c.md)
	rec.waitAfter(t, pos, "EventStateChanged after replacing the clients", isType(watchregistry.EventStateChanged, "owner"))
	if st := r.State(ref); st != watchregistry.StateStopped {
		t.Fatalf("state after replacing the clients: %s, want Stopped", st)
	}
	if _, err := r.Get(ref, ns, "x"); !errors.Is(err, watchregistry.ErrStopped) {
		t.Fatalf("Get of a stopped ref: %v, want ErrStopped", err)
	}
	track(t, r, "owner", ref)
	waitState(t, r, ref, watchregistry.StateSynced)

	pos = rec.mark()
	r.RemoveCluster("other")
	rec.waitAfter(t, pos, "EventStateChanged after removing the cluster", isType(watchregistry.EventStateChanged, "owner"))
	if err := r.Track("owner", []watchregistry.Ref{ref}); err == nil {
		t.Fatal("Track of a ref of a removed cluster succeeded")
	}
	r.Forget("owner")
	waitRunning(t, r, 0)
}

func TestChangingTheLabelSelectorRestartsInformersInTheNewScope(t *testing.T) {
	_, ns, rec, r, ref := startOnShardOne(t)
	if _, err := r.Get(ref, ns, "b"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of an object outside the selector: %v, want NotFound", err)
	}

	if err := r.SetLabelSelector("shard in (("); err == nil {
		t.Fatal("an invalid selector was accepted")
	}
	pos := rec.mark()
	if err := r.SetLabelSelector(selector + ",shard in (2)"); err != nil {
		t.Fatal(err)
	}
	rec.waitAfter(t, pos, "EventStateChanged after the selector changed", isType(watchregistry.EventStateChanged, "owner-a"))
	track(t, r, "owner-a", ref)
	waitState(t, r, ref, watchregistry.StateSynced)
	if _, err := r.Get(ref, ns, "b"); err != nil {
		t.Fatalf("Get of an object the new selector selects: %v", err)
	}
	if _, err := r.Get(ref, ns, "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of an object the new selector leaves out: %v, want NotFound", err)
	}
	// The same selector again restarts nothing.
	pos = rec.mark()
	if err := r.SetLabelSelector(selector + ",shard in (2)"); err != nil {
		t.Fatal(err)
	}
	if st := r.State(ref); st != watchregistry.StateSynced {
		t.Fatalf("state after setting the same selector: %s", st)
	}
	_ = pos
}

func TestAddingALabelSelectorListsOnlyTheAddedScope(t *testing.T) {
	c, ns, rec, r, ref := startOnShardOne(t)
	started := r.Stats().Started
	one, two := selector+",shard in (1)", selector+",shard in (2)"

	pos := rec.mark()
	if err := r.SetLabelSelectors(one, two); err != nil {
		t.Fatal(err)
	}
	// Pending until the added informer has listed: the cache lacks b.
	if _, err := r.Get(ref, ns, "b"); err != nil && !errors.Is(err, watchregistry.ErrNotSynced) {
		t.Fatalf("Get while the added informer lists: %v, want ErrNotSynced or b", err)
	}
	// The owner of the object listed, and the ref's tracker, are woken as
	// after a first list; the tracker is not told to track again.
	rec.waitAfter(t, pos, "owner-b woken by the added list", isType(watchregistry.EventInitialList, "owner-b"))
	rec.waitAfter(t, pos, "owner-a woken once widened", isType(watchregistry.EventInitialList, "owner-a"))
	if n := len(filterRecords(rec.since(pos), isType(watchregistry.EventStateChanged, "owner-a"))); n != 0 {
		t.Fatalf("widening told the tracker to track again %d times:\n%s", n, rec.dump(pos))
	}
	waitState(t, r, ref, watchregistry.StateSynced)
	for _, name := range []string{"a", "b"} {
		if _, err := r.Get(ref, ns, name); err != nil {
			t.Fatalf("Get %s after widening: %v", name, err)
		}
	}
	if _, err := r.Get(ref, ns, "c"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of an object no selector selects: %v, want NotFound", err)
	}
	if s := r.Stats(); s.Started != started+1 || s.Running != 2 || s.CachedObjects != 2 {
		t.Fatalf("after widening: started %d (want %d, the first informer kept), running %d (want 2), cached %d (want 2)",
			s.Started, started+1, s.Running, s.CachedObjects)
	}
	// Both informers deliver events.
	pos = rec.mark()
	patchConfigMap(t, c.cs, ns, "a", `{"data":{"k":"1"}}`)
	patchConfigMap(t, c.cs, ns, "b", `{"data":{"k":"1"}}`)
	rec.waitAfter(t, pos, "a's update", isEvent(watchregistry.EventUpdated, "a"))
	rec.waitAfter(t, pos, "b's update", isEvent(watchregistry.EventUpdated, "b"))

	// An overlapping selector lists an object once more, but List returns
	// it once.
	if err := r.SetLabelSelectors(one, two, selector+",shard in (2,3)"); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitForSync(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	got, err := r.List(ref, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range got {
		names = append(names, u.GetName())
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Fatalf("List over overlapping selectors: %v, want [a b c]", names)
	}

	// Dropping a selector restarts every informer in the new scope.
	pos = rec.mark()
	if err := r.SetLabelSelectors(two); err != nil {
		t.Fatal(err)
	}
	rec.waitAfter(t, pos, "EventStateChanged after a selector was dropped", isType(watchregistry.EventStateChanged, "owner-a"))
	track(t, r, "owner-a", ref)
	waitState(t, r, ref, watchregistry.StateSynced)
	if _, err := r.Get(ref, ns, "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of an object of the dropped selector: %v, want NotFound", err)
	}
	waitRunning(t, r, 1)
	if err := r.SetLabelSelectors(); err == nil {
		t.Fatal("no selector at all was accepted")
	}
	if err := watchregistry.CheckInvariants(r); err != nil {
		t.Fatal(err)
	}
}

// filterRecords returns the records that match pred.
func filterRecords(recs []record, pred func(record) bool) []record {
	var out []record
	for _, rec := range recs {
		if pred(rec) {
			out = append(out, rec)
		}
	}
	return out
}

func TestTrackOfUnknownClusterFailsAndChangesNothing(t *testing.T) {
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	r := startRegistry(t, c, watchregistry.Options[string]{Enqueue: (&recorder{}).enqueue})
	ref := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	track(t, r, "owner", ref)
	err := r.Track("owner", []watchregistry.Ref{{Cluster: "nowhere", GVR: configMaps}})
	if err == nil {
		t.Fatal("Track with an unknown cluster succeeded")
	}
	if st := r.State(ref); st == watchregistry.StateNotTracked {
		t.Fatalf("a failed Track released the owner's previous ref: %s", st)
	}
	if s := r.Stats(); s.Informers[watchregistry.StatePending]+s.Informers[watchregistry.StateSynced] != 1 {
		t.Fatalf("stats after a failed Track: %+v", s)
	}

	// A cluster without the client the mode needs fails the same way.
	md := newRegistry(t, c, watchregistry.Options[string]{Enqueue: (&recorder{}).enqueue, MetadataOnly: true})
	md.SetCluster("no-metadata-client", c.dyn, nil)
	if err := md.Track("owner", []watchregistry.Ref{{Cluster: "no-metadata-client", GVR: configMaps}}); err == nil {
		t.Fatal("Track on a cluster without a metadata client succeeded in metadata-only mode")
	}
}

func TestRunStopsEveryInformerOnReturn(t *testing.T) {
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	r := newRegistry(t, c, watchregistry.Options[string]{Enqueue: (&recorder{}).enqueue})
	base := runtime.NumGoroutine()
	// Tracked before Run: the informers wait for it.
	refs := []watchregistry.Ref{{GVR: configMaps, Namespace: ns}, {GVR: secrets, Namespace: ns}}
	track(t, r, "owner", refs...)
	if _, err := r.Get(refs[0], ns, "x"); !errors.Is(err, watchregistry.ErrNotSynced) {
		t.Fatalf("Get before Run: %v, want ErrNotSynced", err)
	}
	stop := run(t, r)
	for _, ref := range refs {
		waitState(t, r, ref, watchregistry.StateSynced)
	}
	stop()
	if s := r.Stats(); s.Running != 0 {
		t.Fatalf("Run returned with %d informers running", s.Running)
	}
	if err := r.Track("owner", refs); !errors.Is(err, watchregistry.ErrStopped) {
		t.Fatalf("Track after Run returned: %v, want ErrStopped", err)
	}
	waitGoroutines(t, base, 2)
}

func nsObject(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// logSink collects log lines, to check what a person would read.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{Verbosity: 1})
}

// has reports whether one line contains every part.
func (l *logSink) has(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func TestPreparedSelectorJoinsTheScopeListed(t *testing.T) {
	c, ns, rec, r, ref := startOnShardOne(t)
	started := r.Stats().Started
	one, two, three := selector+",shard in (1)", selector+",shard in (2)", selector+",shard in (3)"

	pos := rec.mark()
	if err := r.Prepare(two, three, one); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, r, 3)
	if s := r.Stats(); s.Started != started+2 || s.CachedObjects != 1 {
		t.Fatalf("after Prepare: started %d (want %d: one per prepared selector, not the scope's again), cached %d (want 1)",
			s.Started, started+2, s.CachedObjects)
	}
	// The scope is as it was: the ref stays Synced and reads do not see
	// what the prepared informers cache.
	if st := r.State(ref); st != watchregistry.StateSynced {
		t.Fatalf("state while selectors are prepared: %s, want Synced", st)
	}
	if _, err := r.Get(ref, ns, "b"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of an object only a prepared selector selects: %v, want NotFound", err)
	}
	// Their events are not delivered. The barrier: a create the prepared
	// informer saw after the update (one watch, in order).
	patchConfigMap(t, c.cs, ns, "b", `{"data":{"k":"1"}}`)
	d := configMap(ns, "d", "owner-d", nil)
	d.Labels["shard"] = "2"
	createConfigMap(t, c.cs, d)
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		return slices.Contains(watchregistry.PreparedOwners(r, ref, two), "owner-d"), nil
	})
	if err != nil {
		t.Fatalf("the prepared informer did not note d's owner: %v", err)
	}
	if got := rec.since(pos); len(got) != 0 {
		t.Fatalf("events delivered while only prepared:\n%s", rec.dump(pos))
	}

	// Adding a prepared selector that has listed: the scope widens at once,
	// without turning Pending, and no new informer; the owners of what it
	// saw are woken, the trackers are not.
	if err := r.SetLabelSelectors(one, two); err != nil {
		t.Fatal(err)
	}
	if st := r.State(ref); st != watchregistry.StateSynced {
		t.Fatalf("state once a listed prepared selector joined: %s, want Synced", st)
	}
	for _, name := range []string{"a", "b", "d"} {
		if _, err := r.Get(ref, ns, name); err != nil {
			t.Fatalf("Get %s once the prepared selector joined: %v", name, err)
		}
	}
	rec.waitAfter(t, pos, "owner-b woken", isType(watchregistry.EventInitialList, "owner-b"))
	rec.waitAfter(t, pos, "owner-d woken", isType(watchregistry.EventInitialList, "owner-d"))
	if s := r.Stats(); s.Started != started+2 || s.CachedObjects != 3 {
		t.Fatalf("after the prepared selector joined: started %d (want %d), cached %d (want 3)", s.Started, started+2, s.CachedObjects)
	}
	// It delivers events now.
	patchConfigMap(t, c.cs, ns, "b", `{"data":{"k":"2"}}`)
	rec.waitAfter(t, pos, "b's update once in the scope", isEvent(watchregistry.EventUpdated, "b"))
	if n := len(filterRecords(rec.since(pos), isType(watchregistry.EventInitialList, "owner-a"))); n != 0 {
		t.Fatalf("the tracker was woken %d times by a selector that joined listed:\n%s", n, rec.dump(pos))
	}
	if err := watchregistry.CheckInvariants(r); err != nil {
		t.Fatal(err)
	}

	// Prepare() stops the prepared informer no selector took, alone.
	if err := r.Prepare(); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, r, 2)
	if st := r.State(ref); st != watchregistry.StateSynced {
		t.Fatalf("state once the prepared informers stopped: %s", st)
	}
	if _, err := r.Get(ref, ns, "c"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of an object of a dropped prepared selector: %v, want NotFound", err)
	}

	// A selector prepared just before it joins (listed or not: a prepared
	// informer still listing makes the ref Pending until it has, as when
	// widened), and a ref tracked while a selector is prepared, which gets
	// an informer of it too.
	if err := r.Prepare(three); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, r, 3)
	pos = rec.mark()
	if err := r.SetLabelSelectors(one, two, three); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitForSync(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ref, ns, "c"); err != nil {
		t.Fatalf("Get c once its selector joined: %v", err)
	}
	rec.waitAfter(t, pos, "owner-c woken", isType(watchregistry.EventInitialList, "owner-c"))
	secrets := watchregistry.Ref{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: ns}
	if err := r.Prepare(selector + ",shard in (4)"); err != nil {
		t.Fatal(err)
	}
	track(t, r, "owner-a", ref, secrets)
	waitState(t, r, secrets, watchregistry.StateSynced)
	waitRunning(t, r, 8) // two refs: three selectors and one prepared each
	if err := watchregistry.CheckInvariants(r); err != nil {
		t.Fatal(err)
	}
}

// startOnShardOne creates, in a new namespace, ConfigMaps a, b and c of
// owner-a, owner-b and owner-c, labelled shard 1, 2 and 3, and starts a
// registry of the shard 1 selector, with owner-a tracking the namespace's
// ConfigMaps, synced.
func startOnShardOne(t *testing.T) (clients, string, *recorder, *watchregistry.Registry[string], watchregistry.Ref) {
	t.Helper()
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	for name, shard := range map[string]string{"a": "1", "b": "2", "c": "3"} {
		cm := configMap(ns, name, "owner-"+name, nil)
		cm.Labels["shard"] = shard
		createConfigMap(t, c.cs, cm)
	}
	rec := &recorder{}
	r := startRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue, LabelSelector: selector + ",shard in (1)"})
	ref := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	track(t, r, "owner-a", ref)
	waitState(t, r, ref, watchregistry.StateSynced)
	// The ref turns Synced before the informer's goroutine wakes the owners
	// of its first list; callers mark positions and count wakes after this,
	// so the wake must have landed already.
	rec.waitAfter(t, 0, "owner-a woken by the first list", isType(watchregistry.EventInitialList, "owner-a"))
	return c, ns, rec, r, ref
}

// createSharded creates, in ns, a managed ConfigMap for each name, of the
// owner and in the shard given.
func createSharded(t *testing.T, c clients, ns string, objects map[string][2]string) {
	t.Helper()
	for name, o := range objects {
		cm := configMap(ns, name, o[0], nil)
		cm.Labels["shard"] = o[1]
		createConfigMap(t, c.cs, cm)
	}
}

// TestAListedPreparedSelectorJoiningAPendingRefWakesOnceSynced adds a
// prepared selector that has listed together with one still to list,
// before or after it: the ref is Pending until the latter has listed, and
// the owners of what the former saw are woken then, when their reads
// succeed, not before.
func TestAListedPreparedSelectorJoiningAPendingRefWakesOnceSynced(t *testing.T) {
	one, two, three := selector+",shard in (1)", selector+",shard in (2)", selector+",shard in (3)"
	for _, tc := range []struct {
		name      string
		selectors []string
	}{
		{"prepared selector added first", []string{one, three, two}},
		{"prepared selector added last", []string{one, two, three}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClients(t, controlPlane(t))
			ns := newNamespace(t, c.cs)
			createSharded(t, c, ns, map[string][2]string{"a": {"owner-a", "1"}, "b": {"owner-b", "2"}, "c": {"owner-c", "3"}})
			// Map holds b, listed by the selector that is not prepared: the
			// ref is Pending until the test lets it go.
			hold := newHoldingMap(1, func(ev watchregistry.Event) bool { return ev.Object.GetName() == "b" })
			rec := &recorder{}
			woken := make(chan watchregistry.State, 4)
			var r *watchregistry.Registry[string]
			r = startRegistry(t, c, watchregistry.Options[string]{LabelSelector: one, Map: hold.mapFunc, Enqueue: func(key string, ev watchregistry.Event) {
				rec.enqueue(key, ev)
				if key == "owner-c" && ev.Type == watchregistry.EventInitialList {
					woken <- r.State(ev.Ref)
				}
			}})
			// Cleanups run last first: the Map lets go before Run is waited for.
			t.Cleanup(hold.release)
			ref := watchregistry.Ref{GVR: configMaps, Namespace: ns}
			track(t, r, "owner-a", ref)
			waitState(t, r, ref, watchregistry.StateSynced)
			if err := r.Prepare(three); err != nil {
				t.Fatal(err)
			}
			err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
				return watchregistry.PreparedSynced(r, ref, three), nil
			})
			if err != nil {
				t.Fatalf("the prepared informer did not list: %v", err)
			}

			if err := r.SetLabelSelectors(tc.selectors...); err != nil {
				t.Fatal(err)
			}
			// The owners SetLabelSelectors wakes at once are woken before it
			// returns.
			select {
			case st := <-woken:
				t.Fatalf("owner-c woken while the ref is %s, before the added selector has listed", st)
			default:
			}
			waitClosed(t, hold.blocked, "the added selector's list")
			hold.release()
			select {
			case st := <-woken:
				if st != watchregistry.StateSynced {
					t.Fatalf("owner-c woken while the ref is %s, want Synced", st)
				}
			case <-time.After(waitFor):
				t.Fatalf("owner-c not woken once the ref synced; got:\n%s", rec.dump(0))
			}
			if _, err := r.Get(ref, ns, "c"); err != nil {
				t.Fatalf("Get c once woken: %v", err)
			}
			checkInvariants(t, r)
		})
	}
}

// TestOwnersOfAScopeWidenedAsTheRefSyncsWaitForItsList widens the scope
// right after a ref has synced and before its owners are woken: the owners
// that the added selector's list collects meanwhile are woken once that
// list is done, when their reads succeed, not by the sync before it.
func TestOwnersOfAScopeWidenedAsTheRefSyncsWaitForItsList(t *testing.T) {
	one, two := selector+",shard in (1)", selector+",shard in (2)"
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	createSharded(t, c, ns, map[string][2]string{"a": {"owner-a", "1"}, "x-1": {"owner-x", "2"}, "x-2": {"owner-x", "2"}})
	// Map holds the second object of the added selector's list, whichever
	// comes second: the owner of the first has been collected by then, and
	// the ref is Pending until the test lets it go.
	hold := newHoldingMap(2, func(ev watchregistry.Event) bool { return ev.Object.GetLabels()["shard"] == "2" })
	rec := &recorder{}
	woken := make(chan watchregistry.State, 4)
	var r *watchregistry.Registry[string]
	r = newRegistry(t, c, watchregistry.Options[string]{LabelSelector: one, Map: hold.mapFunc, Enqueue: func(key string, ev watchregistry.Event) {
		rec.enqueue(key, ev)
		if key == "owner-x" && ev.Type == watchregistry.EventInitialList {
			woken <- r.State(ev.Ref)
		}
	}})
	ref := watchregistry.Ref{GVR: configMaps, Namespace: ns}
	var widened atomic.Bool
	hooked := make(chan struct{})
	watchregistry.OnSynced(r, func(synced watchregistry.Ref) {
		if synced != ref || !widened.CompareAndSwap(false, true) {
			return
		}
		defer close(hooked)
		if err := r.SetLabelSelectors(one, two); err != nil {
			t.Error(err)
			return
		}
		select {
		case <-hold.blocked:
		case <-time.After(waitFor):
			t.Errorf("the added selector's list did not reach its second object within %s", waitFor)
		}
	})
	run(t, r)
	t.Cleanup(hold.release)

	track(t, r, "owner-a", ref)
	waitClosed(t, hooked, "the scope widened as the ref synced")
	hold.release()
	select {
	case st := <-woken:
		if st != watchregistry.StateSynced {
			t.Fatalf("owner-x woken while the ref is %s, want Synced", st)
		}
	case <-time.After(waitFor):
		t.Fatalf("owner-x not woken once the added list synced; got:\n%s", rec.dump(0))
	}
	if _, err := r.Get(ref, ns, "x-1"); err != nil {
		t.Fatalf("Get x-1 once woken: %v", err)
	}
	rec.waitAfter(t, 0, "owner-a woken", isType(watchregistry.EventInitialList, "owner-a"))
	checkInvariants(t, r)
}

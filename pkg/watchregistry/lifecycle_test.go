// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/destination"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

func TestPreviousDestination(t *testing.T) {
	secret := &v1alpha1.SecretKeyReference{Name: "kc", Key: "kubeconfig"}
	inventory := []v1alpha1.ManagedResource{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "a", Name: "a"}}
	for _, tc := range []struct {
		name      string
		dest      v1alpha1.Destination
		recorded  *v1alpha1.ClusterReference
		inventory []v1alpha1.ManagedResource
		moved     bool
	}{
		{"no cluster recorded: the current one", v1alpha1.Destination{Server: "https://remote:6443", KubeconfigSecretRef: secret}, nil, inventory, false},
		{"local, both ways of saying it", v1alpha1.Destination{Server: "https://kubernetes.default.svc"}, &v1alpha1.ClusterReference{}, inventory, false},
		{"same remote", v1alpha1.Destination{Server: "https://remote:6443", KubeconfigSecretRef: secret}, &v1alpha1.ClusterReference{Server: "https://remote:6443", KubeconfigSecretRef: secret}, inventory, false},
		{"local to remote", v1alpha1.Destination{Server: "https://remote:6443", KubeconfigSecretRef: secret}, &v1alpha1.ClusterReference{}, inventory, true},
		{"another Secret", v1alpha1.Destination{Server: "https://remote:6443", KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "other"}}, &v1alpha1.ClusterReference{Server: "https://remote:6443", KubeconfigSecretRef: secret}, inventory, true},
		{"moved with nothing to clean up", v1alpha1.Destination{Server: "https://remote:6443"}, &v1alpha1.ClusterReference{}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vr := &v1alpha1.VidraResource{Spec: v1alpha1.VidraResourceSpec{Destination: tc.dest},
				Status: v1alpha1.VidraResourceStatus{InventoryCluster: tc.recorded, ManagedResources: tc.inventory}}
			old, moved := previousDestination(vr)
			if moved != tc.moved {
				t.Fatalf("moved = %v, want %v", moved, tc.moved)
			}
			if moved && !equality.Semantic.DeepEqual(destinationRef(old), tc.recorded) {
				t.Fatalf("previous destination %+v, want %+v", old.Spec.Destination, tc.recorded)
			}
			if !equality.Semantic.DeepEqual(vr.Spec.Destination, tc.dest) {
				t.Fatalf("the resource was changed: %+v", vr.Spec.Destination)
			}
		})
	}
}

// The tests below run one sync against fake clients, in the manner of
// k8s.io/sample-controller's controller_test.go: a fixture holds the fakes
// and what to preload into the informer cache and the trackers; run syncs
// one key; the case then compares what was sent, in order, to every fake,
// the status written, the Events and what sync decided. They check the
// decisions of one reconcile; what those decisions do to a real cluster is
// the end-to-end tests' business.

// TestSyncDecisions runs one sync per case and compares what it decided:
// the requests it sent and in which order, the status it wrote, the Events
// it recorded, when it asked to come back, and whether it asked for a retry.
// A reconcile whose objects' cache is still listing, as at startup or
// after a rebalance, waits for the list rather than reading each object
// from the API server: the object is then read from the cache (no get).
func TestReadsWaitForACacheStillListing(t *testing.T) {
	// As "a reconcile that changes nothing writes nothing" in
	// TestSyncDecisions, whose registry does not run and so reads the
	// object with a get.
	vr := newVR(operatorNS, "steady", configMapManifest, reportedInSync)
	f := newFixture(t, []*v1alpha1.VidraResource{vr}, liveApp(operatorNS, newVR(operatorNS, "steady", "")))
	f.startRegistry = true
	if _, err := f.run(cache.MetaObjectToName(vr)); err != nil {
		t.Fatalf("sync: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.actions) > 0 || len(f.statuses) > 0 {
		t.Errorf("requests sent: %q, want none: the object read from the cache once listed, and found in sync", f.actions)
	}
	if !f.c.registry.Synced(configMapsRef) {
		t.Errorf("the ConfigMaps' cache is %s, want Synced", f.c.registry.State(configMapsRef))
	}
}

// A list that keeps failing is waited for once, for cacheSyncWait from the
// informer's start, not at every reconcile: past that, a reconcile reads
// from the API server at once and holds no worker.
func TestReadsDoNotWaitForAListThatKeepsFailing(t *testing.T) {
	vr := newVR(operatorNS, "steady", configMapManifest, reportedInSync)
	f := newFixture(t, []*v1alpha1.VidraResource{vr}, liveApp(operatorNS, newVR(operatorNS, "steady", "")))
	f.startRegistry, f.watching = true, true
	f.dynamic.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("conversion webhook unavailable"))
	})
	// The informer starts as the fixture tracks the objects; the reconcile
	// comes longer than the wait after that.
	f.beforeSync = func() { f.clock.Step(11 * time.Second) }
	done := make(chan error, 1)
	go func() {
		_, err := f.run(cache.MetaObjectToName(vr))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("sync: %v", err)
		}
	case <-time.After(5 * time.Second):
		// The wait would be 10 s; the sync itself takes milliseconds.
		t.Fatal("the sync waited for a list that keeps failing")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(f.actions, []string{"get configmaps vidra-system/app"}) {
		t.Errorf("requests sent: %q, want the object read from the API server", f.actions)
	}
}

func TestSyncDecisions(t *testing.T) {
	remote := func(vr *v1alpha1.VidraResource) {
		vr.Spec.Destination = v1alpha1.Destination{
			Server: "https://remote.example:6443", KubeconfigSecretRef: &v1alpha1.SecretKeyReference{Name: "remote-kubeconfig"},
		}
		vr.Status.InventoryCluster = destinationRef(vr)
	}
	interval := syncResult{requeueAfter: syncInterval, requeueTrigger: TriggerInterval}
	const (
		noError = iota
		retry
		conflict
	)

	for _, tc := range []struct {
		name string
		// vr is the resource synced; nil syncs a key the cache does not hold.
		vr   *v1alpha1.VidraResource
		live []runtime.Object
		// react adds the fakes' answers beyond their trackers'.
		react func(f *fixture)
		// statusConflict refuses status writes with a 409.
		statusConflict bool
		// reconcileTimeout is the controller's --reconcile-timeout.
		reconcileTimeout time.Duration
		// watching has the resource's objects watched before the sync.
		watching bool

		wantActions []string
		// wantStatus is the one status write expected; nil expects none.
		wantStatus *wantStatus
		// wantEvents are prefixes ("Type Reason message") of the Events.
		wantEvents []string
		wantResult syncResult
		wantErr    int
		// wantWatching says whether the resource's objects are watched
		// after the sync.
		wantWatching bool
	}{
		{
			name:     "a deleted resource is forgotten, its watches released, and nothing is written",
			watching: true,
		},
		{
			name:        "a new resource gets the finalizer, guarded by its resourceVersion, before anything is applied",
			vr:          newVR(operatorNS, "new", configMapManifest, withoutFinalizer),
			wantActions: []string{finalizerPatch(newVR(operatorNS, "new", ""), v1alpha1.Finalizer), "get configmaps vidra-system/app", "apply configmaps vidra-system/app", "update vidraresources/status vidra-system/new"},
			wantStatus: &wantStatus{
				conditions:  []cond{{v1alpha1.ConditionHealthy, metav1.ConditionTrue, v1alpha1.ReasonAllCurrent}, {v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled}},
				deployState: v1alpha1.DeployStateSucceeded, managed: 1, readyMessage: "1 object applied and in sync",
			},
			wantResult:   interval,
			wantWatching: true,
		},
		{
			name: "a finalizer patch on a stale read fails with a conflict, and nothing else is done",
			vr:   newVR(operatorNS, "stale", configMapManifest, withoutFinalizer),
			react: func(f *fixture) {
				f.meta.PrependReactor("patch", v1alpha1.ResourcePlural, func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupName, Resource: v1alpha1.ResourcePlural}, "stale", errors.New("the object has been modified"))
				})
			},
			wantActions: []string{finalizerPatch(newVR(operatorNS, "stale", ""), v1alpha1.Finalizer)},
			wantErr:     conflict,
		},
		{
			name:        "a suspended resource reports Ready=False Suspended, stops its watches and applies nothing",
			vr:          newVR(operatorNS, "paused", configMapManifest, suspended),
			watching:    true,
			wantActions: []string{"update vidraresources/status vidra-system/paused"},
			wantStatus: &wantStatus{
				conditions:  []cond{{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSuspended}},
				deployState: v1alpha1.DeployStateStale, readyMessage: "spec.suspend",
			},
			wantEvents: []string{"Normal Suspended Reconciliation suspended"},
		},
		{
			name:     "a suspended resource that says so already writes nothing",
			vr:       newVR(operatorNS, "paused", configMapManifest, suspended, reportedSuspended),
			watching: true,
		},
		{
			name:        "a resource of an untrusted namespace that names no ServiceAccount stalls with ServiceAccountRequired, contacts nothing, and waits for the interval",
			vr:          newVR("tenant", "untrusted", configMapManifest),
			wantActions: []string{"update vidraresources/status tenant/untrusted"},
			wantStatus: &wantStatus{
				conditions: []cond{
					{v1alpha1.ConditionHealthy, metav1.ConditionUnknown, v1alpha1.ReasonNothingApplied},
					{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonServiceAccountRequired},
					{v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonServiceAccountRequired},
				},
				deployState: v1alpha1.DeployStateFailed, readyMessage: "namespace tenant is not trusted",
			},
			wantEvents: []string{"Warning ServiceAccountRequired nothing applied: namespace tenant is not trusted"},
			wantResult: interval,
		},
		{
			name:        "a manifest that does not parse is reported with its document, applies nothing, and is not retried",
			vr:          newVR(operatorNS, "broken", badManifest),
			wantActions: []string{"update vidraresources/status vidra-system/broken"},
			wantStatus: &wantStatus{
				conditions: []cond{
					{v1alpha1.ConditionHealthy, metav1.ConditionUnknown, v1alpha1.ReasonNothingApplied},
					{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidManifest},
					{v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidManifest},
				},
				deployState: v1alpha1.DeployStateFailed, readyMessage: "document 2 (line 8): kind: required",
			},
			wantEvents: []string{"Warning InvalidManifest document 2 (line 8): kind: required"},
			wantResult: interval,
		},
		{
			name:         "a reconcile that changes nothing writes nothing",
			vr:           newVR(operatorNS, "steady", configMapManifest, reportedInSync),
			live:         []runtime.Object{liveApp(operatorNS, newVR(operatorNS, "steady", ""))},
			wantActions:  []string{"get configmaps vidra-system/app"},
			wantResult:   interval,
			wantWatching: true,
		},
		{
			name:        "an object that exists without Vidra's marks is a conflict, not taken over, and retried with backoff",
			vr:          newVR(operatorNS, "blocked", configMapManifest),
			live:        []runtime.Object{liveApp(operatorNS, nil)},
			wantActions: []string{"get configmaps vidra-system/app", "update vidraresources/status vidra-system/blocked"},
			wantStatus: &wantStatus{
				conditions: []cond{
					{v1alpha1.ConditionHealthy, metav1.ConditionUnknown, v1alpha1.ReasonNothingApplied},
					{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonUnmanagedExists},
					{v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonUnmanagedExists},
					{v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProgressing},
					{v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonUnmanagedExists},
				},
				deployState: v1alpha1.DeployStateFailed, readyMessage: "exists and is not managed by Vidra",
			},
			wantEvents: []string{"Warning Conflict ConfigMap vidra-system/app (document 1): exists and is not managed by Vidra"},
			wantResult: syncResult{requeueAfter: syncInterval, requeueTrigger: TriggerInterval, conflict: true},
			wantErr:    retry,
			// Nothing of its kind was written, and the inventory holds
			// none: no informer starts for it.
			wantWatching: false,
		},
		{
			name: "an apply the API server fails is reported as Running and retried with backoff",
			vr:   newVR(operatorNS, "flaky", configMapManifest),
			react: func(f *fixture) {
				f.dynamic.PrependReactor("patch", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewInternalError(errors.New("etcd leader changed"))
				})
			},
			wantActions: []string{"get configmaps vidra-system/app", "apply configmaps vidra-system/app", "update vidraresources/status vidra-system/flaky"},
			wantStatus: &wantStatus{
				conditions: []cond{
					{v1alpha1.ConditionHealthy, metav1.ConditionUnknown, v1alpha1.ReasonNothingApplied},
					{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed},
					{v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProgressing},
				},
				deployState: v1alpha1.DeployStateRunning, readyMessage: "etcd leader changed",
			},
			wantEvents: []string{"Warning ApplyFailed ConfigMap vidra-system/app (document 1): "},
			wantResult: interval,
			wantErr:    retry,
			// Its only apply failed: no informer starts for its kind.
			wantWatching: false,
		},
		{
			name:           "a status write that lost a race is returned as a conflict, to be retried",
			vr:             newVR(operatorNS, "raced", configMapManifest),
			statusConflict: true,
			wantActions:    []string{"get configmaps vidra-system/app", "apply configmaps vidra-system/app", "update vidraresources/status vidra-system/raced"},
			wantStatus: &wantStatus{
				conditions:  []cond{{v1alpha1.ConditionHealthy, metav1.ConditionTrue, v1alpha1.ReasonAllCurrent}, {v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled}},
				deployState: v1alpha1.DeployStateSucceeded, managed: 1,
			},
			wantResult:   interval,
			wantErr:      conflict,
			wantWatching: true,
		},
		{
			name:     "deleting a resource with nothing recorded as applied checks for the objects its manifest declares, stops its watches, then removes the finalizer",
			vr:       newVR(operatorNS, "gone", configMapManifest, deleting),
			watching: true,
			// No namespace read: whether a namespace is being deleted is
			// asked as the operator, so only for recorded objects.
			wantActions: []string{
				"get configmaps vidra-system/app",
				finalizerPatch(newVR(operatorNS, "gone", "")),
			},
			wantEvents: []string{"Normal Deleted Deleted 0 managed objects"},
		},
		{
			name:        "a destination namespace that is not a namespace name is refused before any request",
			vr:          newVR(operatorNS, "proxied", configMapManifest, toNamespace(proxyPath)),
			wantActions: []string{"update vidraresources/status vidra-system/proxied"},
			wantStatus: &wantStatus{
				conditions: []cond{
					{v1alpha1.ConditionHealthy, metav1.ConditionUnknown, v1alpha1.ReasonNothingApplied},
					{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidManifest},
					{v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidManifest},
				},
				deployState: v1alpha1.DeployStateFailed, readyMessage: "spec.destination.namespace: \"kube-system/services/",
			},
			wantEvents: []string{"Warning InvalidManifest spec.destination.namespace: \"kube-system/services/"},
			wantResult: interval,
		},
		{
			// The namespace would be a segment of the path of the request
			// that asks whether it is being deleted, made as the operator.
			name:        "deleting a resource whose destination namespace is not a namespace name asks for nothing at that path",
			vr:          newVR(operatorNS, "proxied", configMapManifest, toNamespace(proxyPath), deleting),
			wantActions: []string{finalizerPatch(newVR(operatorNS, "proxied", ""))},
			wantEvents:  []string{"Normal Deleted Deleted 0 managed objects"},
		},
		{
			name: "a deletion that runs out of the reconcile's time keeps the finalizer, says how far it got, and is retried",
			vr: newVR(operatorNS, "slow", configMapManifest, deleting, func(vr *v1alpha1.VidraResource) {
				vr.Status.ManagedResources, vr.Status.ManagedCount = appInventory(operatorNS), 1
			}),
			// Out of time before the first object.
			reconcileTimeout: time.Nanosecond,
			wantActions:      []string{"update vidraresources/status vidra-system/slow"},
			wantStatus: &wantStatus{
				conditions: []cond{{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDeleting}, {v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonDeleting}},
				managed:    1,
				readyMessage: "Cleaning up managed objects is not finished, retrying with backoff: " +
					"the reconcile ran out of its time (1ns, --reconcile-timeout); 1 of 1 object left to look at",
			},
			wantEvents: []string{"Warning CleanupFailed Cleaning up managed objects is not finished"},
			wantErr:    retry,
		},
		{
			name: "an Orphan deletion that runs out of the reconcile's time keeps the finalizer too, so that no object keeps Vidra's marks",
			vr: newVR(operatorNS, "slow-orphan", configMapManifest, deleting, func(vr *v1alpha1.VidraResource) {
				vr.Spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan
				vr.Status.ManagedResources, vr.Status.ManagedCount = appInventory(operatorNS), 1
			}),
			reconcileTimeout: time.Nanosecond,
			wantActions:      []string{"update vidraresources/status vidra-system/slow-orphan"},
			wantStatus: &wantStatus{
				conditions:   []cond{{v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonDeleting}, {v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonDeleting}},
				managed:      1,
				readyMessage: "Cleaning up managed objects is not finished",
			},
			wantEvents: []string{"Warning CleanupFailed Cleaning up managed objects is not finished"},
			wantErr:    retry,
		},
		{
			name: "deleting with Orphan when the remote destination's Secret is gone removes the finalizer and names what is left behind",
			vr: newVR(operatorNS, "stranded", configMapManifest, deleting, remote, func(vr *v1alpha1.VidraResource) {
				vr.Spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan
				vr.Status.ManagedResources = appInventory("apps")
			}),
			wantActions: []string{finalizerPatch(newVR(operatorNS, "stranded", ""))},
			wantEvents: []string{
				"Warning LeftBehind Finalizer removed without cleanup, the destination's credentials are gone: Secret vidra-system/remote-kubeconfig named by destination.kubeconfigSecretRef does not exist; " +
					"left behind on https://remote.example:6443: ConfigMap apps/app",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := cache.ObjectName{Namespace: operatorNS, Name: "deleted"}
			var vrs []*v1alpha1.VidraResource
			if tc.vr != nil {
				key = cache.MetaObjectToName(tc.vr)
				vrs = append(vrs, tc.vr)
			}
			f := newFixture(t, vrs, tc.live...)
			f.statusConflict, f.watching, f.reconcileTimeout = tc.statusConflict, tc.watching, tc.reconcileTimeout
			if tc.react != nil {
				tc.react(f)
			}

			res, err := f.run(key)

			switch {
			case tc.wantErr == noError && err != nil:
				t.Errorf("sync returned %v, want no error (no retry)", err)
			case tc.wantErr == retry && err == nil:
				t.Errorf("sync returned no error, want one to retry with backoff")
			case tc.wantErr == conflict && !apierrors.IsConflict(err):
				t.Errorf("sync returned %v, want a conflict", err)
			}
			if res != tc.wantResult {
				t.Errorf("sync result %+v, want %+v", res, tc.wantResult)
			}
			f.mu.Lock()
			actions, statuses := f.actions, f.statuses
			f.mu.Unlock()
			if !slices.Equal(actions, tc.wantActions) {
				t.Errorf("requests sent:\n  %s\nwant:\n  %s", strings.Join(actions, "\n  "), strings.Join(tc.wantActions, "\n  "))
			}
			switch {
			case tc.wantStatus == nil && len(statuses) > 0:
				t.Errorf("status written %+v, want no status write", statuses)
			case tc.wantStatus != nil && len(statuses) != 1:
				t.Errorf("%d status writes, want 1", len(statuses))
			case tc.wantStatus != nil:
				tc.wantStatus.check(t, statuses[0])
			}
			if got := f.watches(); got != tc.wantWatching {
				t.Errorf("objects watched after the sync: %v, want %v", got, tc.wantWatching)
			}
			events := f.events()
			if len(events) != len(tc.wantEvents) {
				t.Errorf("Events recorded:\n  %s\nwant:\n  %s", strings.Join(events, "\n  "), strings.Join(tc.wantEvents, "\n  "))
			} else {
				for i := range events {
					if !strings.HasPrefix(events[i], tc.wantEvents[i]) {
						t.Errorf("Event %q, want one starting %q", events[i], tc.wantEvents[i])
					}
				}
			}
		})
	}
}

// After a rebalance or a start, a resource with an object missing (deleted
// while no replica served it, or while the operator was down) is
// reconciled before the intact ones are verified: each intact resource is
// put off once, with no request, behind the rest, then verified.
func TestRebalanceAndStartRestoreMissingObjectsFirst(t *testing.T) {
	for _, trigger := range []Trigger{TriggerRebalance, TriggerStartup} {
		t.Run(string(trigger), func(t *testing.T) { testMissingObjectsFirst(t, trigger) })
	}
}

func testMissingObjectsFirst(t *testing.T, trigger Trigger) {
	intact := newVR(operatorNS, "intact", configMapManifest, reportedInSync)
	// broken's ConfigMap, other, is gone.
	broken := newVR(operatorNS, "broken", strings.Replace(configMapManifest, "name: app", "name: other", 1), reportedInSync,
		func(vr *v1alpha1.VidraResource) { vr.Status.ManagedResources[0].Name = "other" })
	f := newFixture(t, []*v1alpha1.VidraResource{intact, broken}, liveApp(operatorNS, intact))
	c := f.newController()
	f.c = c
	f.recordRequests()
	startRegistry(t, c)
	var order []string
	c.opts.OnReconcile = func(key cache.ObjectName, _ Trigger, result string) {
		order = append(order, key.Name+" "+result)
	}
	// The ConfigMaps' informer lists first, and its list wakes intact, the
	// owner of the object it found, as at startup. Waited for here, so that
	// the wake is not taken for a second putting off when it comes late.
	ctx := t.Context()
	if err := c.registry.Track(cache.MetaObjectToName(intact), []watchregistry.Ref{configMapsRef}); err != nil {
		t.Fatal(err)
	}
	if err := c.registry.WaitForSync(ctx, configMapsRef); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return c.queue.Len() == 1, nil
	}); err != nil {
		t.Fatalf("the first list woke nobody: %v", err)
	}
	// As ShardChanged, or the informers' first lists, queue them; the
	// intact resource first.
	c.enqueue(cache.MetaObjectToName(intact), trigger)
	c.enqueue(cache.MetaObjectToName(broken), trigger)
	for i := 0; i < 3 && c.queue.Len() > 0; i++ {
		c.processNextWorkItem(context.Background())
	}
	if want := []string{"broken success", "intact success"}; !slices.Equal(order, want) {
		t.Errorf("reconciles %q, want %q: the resource missing its object first", order, want)
	}
	if n := c.queue.Len(); n != 0 {
		t.Errorf("%d keys still queued, want none: a resource is put off once", n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := []string{"apply configmaps vidra-system/other", "update vidraresources/status vidra-system/broken"}; !slices.Equal(f.actions, want) {
		t.Errorf("requests sent: %q, want %q: the missing object restored, the intact one read from the cache", f.actions, want)
	}
}

// A deletion that runs out of the reconcile's time keeps in the inventory
// only what it did not get to: objects found gone are dropped, so that
// each try gets further, however many objects one try's time allows.
//
// The reconcile's deadline is a timer of the time package. In a synctest
// bubble, time moves only while every goroutine of the test waits: the
// reads take no time at all but the looked-th, which outlasts the
// reconcile's whole time. When it returns, the deadline has passed and the
// reconcile's context is cancelled, whatever the machine's load: the
// deletion stops right after it.
func TestDeletionOutOfTimeKeepsOnlyWhatIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const objects, looked = 8, 3
		vr := newVR(operatorNS, "many", "", deleting, func(vr *v1alpha1.VidraResource) {
			for i := range objects {
				vr.Status.ManagedResources = append(vr.Status.ManagedResources,
					v1alpha1.ManagedResource{APIVersion: "v1", Kind: "ConfigMap", Namespace: operatorNS, Name: fmt.Sprintf("gone-%d", i)})
			}
			vr.Status.ManagedCount = objects
		})
		f := newFixture(t, []*v1alpha1.VidraResource{vr})
		// The objects are all gone already; the last read of the try is
		// the looked-th.
		f.reconcileTimeout = time.Minute
		reads := 0
		f.meta.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
			if reads++; reads == looked {
				time.Sleep(f.reconcileTimeout + time.Second)
			}
			return false, nil, nil
		})
		if _, err := f.run(cache.MetaObjectToName(vr)); err == nil {
			t.Fatal("sync returned no error, want one to retry with backoff")
		}
		if reads != looked {
			t.Errorf("%d objects read, want %d: the try stops once its time is up", reads, looked)
		}
		f.mu.Lock()
		statuses := f.statuses
		f.mu.Unlock()
		if len(statuses) != 1 {
			t.Fatalf("%d status writes, want 1", len(statuses))
		}
		left := statuses[0].ManagedResources
		if want := vr.Status.ManagedResources[looked:]; !slices.Equal(left, want) || int(statuses[0].ManagedCount) != len(want) {
			t.Errorf("inventory written %v (count %d), want the %d objects not looked at: %v", left, statuses[0].ManagedCount, len(want), want)
		}
	})
}

// A tenant's own API server can send objects carrying the marks of any
// resource, whose UID is no secret: its objects carry it. Once a resource's
// objects are watched on a cluster, only that cluster's events wake it; a
// resource not reconciled since the operator started is woken by any.
func TestOnlyTheWatchedClusterWakesAResource(t *testing.T) {
	vr := newVR(operatorNS, "app", configMapManifest)
	f := newFixture(t, []*v1alpha1.VidraResource{vr})
	event := func(cluster string) watchregistry.Event {
		return watchregistry.Event{Type: watchregistry.EventUpdated, Ref: watchregistry.Ref{Cluster: cluster, GVR: configMapsRef.GVR}, Object: liveApp(operatorNS, vr)}
	}
	forged := "https://tenant.example:6443 (Secret tenant/remote, key kubeconfig)"
	c := f.newController()
	if got := c.ownerOf(event(forged)); len(got) != 1 {
		t.Fatalf("before any reconcile, an event woke %v; want the resource", got)
	}
	f.c = c
	if _, err := c.sync(context.Background(), cache.MetaObjectToName(vr)); err != nil {
		t.Fatal(err)
	}
	if got := c.ownerOf(event(destination.LocalCluster)); len(got) != 1 {
		t.Errorf("an event of the cluster watched woke %v; want the resource", got)
	}
	if got := c.ownerOf(event(forged)); len(got) != 0 {
		t.Errorf("an event of another cluster, with the resource's marks, woke %v; want nothing", got)
	}
	// On the cluster watched, a tenant may copy the marks of a resource
	// that placed an object in its namespace onto objects of its own.
	for _, at := range []cache.ObjectName{{Namespace: "team-b", Name: "app"}, {Namespace: operatorNS, Name: "copy"}} {
		copied := event(destination.LocalCluster)
		copied.Object.SetNamespace(at.Namespace)
		copied.Object.SetName(at.Name)
		if got := c.ownerOf(copied); len(got) != 0 {
			t.Errorf("an event of %s, not in the manifest, with the resource's marks, woke %v; want nothing", at, got)
		}
	}
}

// A cleanup that runs out of time keeps, as the inventory, what it has not
// looked at yet of the inventory only: the manifest's objects that were
// never recorded are looked for again, as unrecorded, by the next try.
func TestDeletionOutOfTimeDoesNotRecordTheManifestsObjects(t *testing.T) {
	manifest := configMapManifest + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: never-applied\n"
	vr := newVR(operatorNS, "cut", manifest, deleting, func(vr *v1alpha1.VidraResource) {
		vr.Status.ManagedResources, vr.Status.ManagedCount = appInventory(operatorNS), 1
	})
	f := newFixture(t, []*v1alpha1.VidraResource{vr})
	// Out of time before the first object.
	f.reconcileTimeout = time.Nanosecond
	if _, err := f.run(cache.MetaObjectToName(vr)); err == nil {
		t.Fatal("sync returned no error, want one to retry with backoff")
	}
	f.mu.Lock()
	statuses := f.statuses
	f.mu.Unlock()
	if len(statuses) != 1 {
		t.Fatalf("%d status writes, want 1", len(statuses))
	}
	if got, want := statuses[0].ManagedResources, appInventory(operatorNS); !slices.Equal(got, want) {
		t.Errorf("inventory written %v, want the recorded object alone: %v", got, want)
	}
}

// Names the API server of a tenant's own cluster accepts, which JSON writes
// in 6 bytes a character, must not take the inventory past what a status
// can hold: the manifest is refused, and nothing is applied.
func TestAManifestWhoseNamesCannotFitItsInventoryIsRefused(t *testing.T) {
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"%d-%s\"\n", i, strings.Repeat("<", 240))
	}
	vr := newVR(operatorNS, "escaped", b.String())
	f := newFixture(t, []*v1alpha1.VidraResource{vr})
	if _, err := f.run(cache.MetaObjectToName(vr)); err != nil {
		t.Fatalf("sync: %v, want a stalled resource and no retry", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.actions {
		if strings.HasPrefix(a, "apply ") || strings.HasPrefix(a, "get configmaps") {
			t.Fatalf("request %q, want none for the manifest's objects", a)
		}
	}
	if len(f.statuses) != 1 {
		t.Fatalf("%d status writes, want 1", len(f.statuses))
	}
	ready := meta.FindStatusCondition(f.statuses[0].Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Reason != v1alpha1.ReasonManifestTooLarge || !strings.Contains(ready.Message, "split the objects") {
		t.Errorf("Ready condition %+v, want ManifestTooLarge saying what to do", ready)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// things returns n refs of made-up resources of one cluster, and a fake
// dynamic client that serves them (empty), so that informers of them run
// without a control plane.
func things(cluster string, n int) ([]watchregistry.Ref, *dynamicfake.FakeDynamicClient) {
	refs := make([]watchregistry.Ref, n)
	kinds := map[schema.GroupVersionResource]string{}
	for i := range refs {
		gvr := schema.GroupVersionResource{Group: "budget.example", Version: "v1", Resource: fmt.Sprintf("things%d", i)}
		refs[i] = watchregistry.Ref{Cluster: cluster, GVR: gvr}
		kinds[gvr] = fmt.Sprintf("Thing%dList", i)
	}
	return refs, dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds)
}

func budgetRegistry(t *testing.T, b watchregistry.InformerBudget, clk *testingclock.FakeClock, enqueue func(string, watchregistry.Event)) *watchregistry.Registry[string] {
	t.Helper()
	if enqueue == nil {
		enqueue = func(string, watchregistry.Event) {}
	}
	opts := watchregistry.Options[string]{
		Map: func(watchregistry.Event) []string { return nil }, Enqueue: enqueue, Informers: b,
		// Owners are "tenant/name".
		Tenant: func(owner string) string { return owner[:strings.IndexByte(owner, '/')] },
		Linger: time.Hour,
	}
	if clk != nil {
		opts.Clock = clk
	}
	r, err := watchregistry.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wantBudgetError(t *testing.T, err error, scope watchregistry.InformerScope, name string, limit, need int) {
	t.Helper()
	var be *watchregistry.InformerBudgetError
	if !errors.Is(err, watchregistry.ErrTooManyInformers) || !errors.As(err, &be) {
		t.Fatalf("Track: %v, want an InformerBudgetError", err)
	}
	if be.Scope != scope || be.Name != name || be.Limit != limit || be.Need != need {
		t.Fatalf("Track refused with %+v, want scope %s, name %q, limit %d, need %d", *be, scope, name, limit, need)
	}
}

func TestTenantBudgetChargesEveryTenantForTheInformersItUses(t *testing.T) {
	refs, dyn := things("", 4)
	r := budgetRegistry(t, watchregistry.InformerBudget{PerTenant: 2}, nil, nil)
	r.SetCluster("", dyn, nil)

	track(t, r, "a/one", refs[0], refs[1])
	// A second owner of the tenant sharing its refs costs it nothing more.
	track(t, r, "a/two", refs[1])
	err := r.Track("a/two", []watchregistry.Ref{refs[1], refs[2]})
	wantBudgetError(t, err, watchregistry.ScopeTenant, "a", 2, 3)
	if got := r.Refs("a/two"); len(got) != 1 || got[0] != refs[1] {
		t.Fatalf("a refused Track changed the owner's refs: %v", got)
	}

	// Another tenant is charged for the informers a runs already: it
	// cannot watch more by leaning on a's.
	track(t, r, "b/one", refs[0], refs[1])
	err = r.Track("b/one", []watchregistry.Ref{refs[0], refs[1], refs[2]})
	wantBudgetError(t, err, watchregistry.ScopeTenant, "b", 2, 3)

	// A tenant that lets a kind go has room for another.
	track(t, r, "a/one", refs[1])
	track(t, r, "a/two", refs[1], refs[3])
	r.Forget("a/one")
	r.Forget("a/two")
	track(t, r, "a/three", refs[2], refs[3])
}

func TestClusterBudgetStopsLingeringInformersBeforeRefusing(t *testing.T) {
	refs, dyn := things("", 5)
	r := budgetRegistry(t, watchregistry.InformerBudget{PerCluster: 2}, nil, nil)
	r.SetCluster("", dyn, nil)
	run(t, r)

	track(t, r, "a/one", refs[0], refs[1])
	r.Forget("a/one") // both linger, for an hour
	track(t, r, "b/one", refs[2], refs[3])
	for _, ref := range refs[:2] {
		if st := r.State(ref); st != watchregistry.StateNotTracked {
			t.Errorf("%s: %s, want the lingering informer stopped to make room", ref, st)
		}
	}
	err := r.Track("c/one", []watchregistry.Ref{refs[4]})
	wantBudgetError(t, err, watchregistry.ScopeCluster, "", 2, 3)
	if r.State(refs[4]) != watchregistry.StateNotTracked {
		t.Error("a refused Track started an informer")
	}
	// A ref served already costs the cluster nothing.
	track(t, r, "c/one", refs[2])
}

func TestTotalBudgetCountsTheInformersOfEveryCluster(t *testing.T) {
	local, dyn := things("", 2)
	remote, rdyn := things("remote", 2)
	r := budgetRegistry(t, watchregistry.InformerBudget{Total: 3}, nil, nil)
	r.SetCluster("", dyn, nil)
	r.SetCluster("remote", rdyn, nil)

	track(t, r, "a/one", local...)
	err := r.Track("b/one", remote)
	wantBudgetError(t, err, watchregistry.ScopeTotal, "", 3, 4)
	track(t, r, "b/one", remote[0])
	if got := r.Stats().Informers[watchregistry.StatePending]; got != 3 {
		t.Errorf("%d informers, want 3", got)
	}
}

// refusingClient refuses every watch, as a client bounding its open watches
// would when it has no room.
type refusingClient struct{ dynamic.Interface }

func (c refusingClient) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return refusingResource{c.Interface.Resource(gvr)}
}

type refusingResource struct {
	dynamic.NamespaceableResourceInterface
}

func (r refusingResource) Namespace(ns string) dynamic.ResourceInterface {
	return refusingNamespace{r.NamespaceableResourceInterface.Namespace(ns)}
}

func (r refusingResource) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, errNoRoom
}

type refusingNamespace struct{ dynamic.ResourceInterface }

func (r refusingNamespace) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, errNoRoom
}

var errNoRoom = fmt.Errorf("no room for another watch: %w", watchregistry.ErrRefused)

func TestInformerRefusedByItsClientStopsUntilItsHoldHasPassed(t *testing.T) {
	refs, dyn := things("", 1)
	clk := testingclock.NewFakeClock(time.Now())
	rec := &recorder{}
	r := budgetRegistry(t, watchregistry.InformerBudget{}, clk, rec.enqueue)
	r.SetCluster("", refusingClient{dyn}, nil)
	run(t, r)

	track(t, r, "a/one", refs[0])
	waitState(t, r, refs[0], watchregistry.StateRefused)
	rec.waitCount(t, "the owner told", isType(watchregistry.EventStateChanged, "a/one"), 1)
	snap, _ := r.Snapshot(refs[0])
	if !errors.Is(snap.LastError, watchregistry.ErrRefused) || snap.HeldUntil.IsZero() {
		t.Fatalf("snapshot of a refused ref: %+v, want its error and its hold", snap)
	}
	started := r.Stats().Started

	// Tracking it again, as an owner does at every reconcile, starts
	// nothing during the hold.
	track(t, r, "a/one", refs[0])
	track(t, r, "a/two", refs[0])
	if got := r.Stats().Started; got != started || r.State(refs[0]) != watchregistry.StateRefused {
		t.Fatalf("%d informers started during the hold, state %s; want none, Refused", got-started, r.State(refs[0]))
	}

	// After it, a Track starts a fresh one, refused again, whose hold is
	// twice as long.
	clk.Step(snap.HeldUntil.Sub(clk.Now()))
	track(t, r, "a/one", refs[0])
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, waitFor, true, func(context.Context) (bool, error) {
		s, _ := r.Snapshot(refs[0])
		return r.Stats().Started > started && s.State == watchregistry.StateRefused && s.HeldUntil.After(snap.HeldUntil), nil
	})
	if err != nil {
		t.Fatalf("no fresh informer after the hold: %+v", r.Stats())
	}
	again, _ := r.Snapshot(refs[0])
	if hold := again.HeldUntil.Sub(clk.Now()); hold != 60*time.Second {
		t.Errorf("second hold %v, want 1m0s", hold)
	}
}

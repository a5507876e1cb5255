// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	listers "github.com/vidra-operator/vidra/pkg/generated/listers/infrahub/v1alpha1"
)

// A change that its dependencies hold back is not waited on for health
// yet: the previous generation's healthCheckStartTime goes, so that the wait
// starts when the change is applied, however long it was held.
func TestBlockedChangeDropsThePreviousWaitsStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// observed is the generation the resource's status reports.
		observed  int64
		wantStart bool
	}{
		{name: "a new generation held back drops the start", observed: 1, wantStart: false},
		{name: "the generation already held back keeps what it has", observed: 2, wantStart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vr := newVR(operatorNS, "dependent", configMapManifest, func(vr *v1alpha1.VidraResource) {
				vr.Generation = 2
				vr.Spec.Wait = true
				vr.Spec.DependsOn = []v1alpha1.DependencyReference{{Name: "missing"}}
				start := metav1.NewTime(time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC))
				vr.Status.ObservedGeneration = tc.observed
				vr.Status.HealthCheckStartTime = &start
			})
			f := newFixture(t, []*v1alpha1.VidraResource{vr})

			if _, err := f.run(cache.MetaObjectToName(vr)); err != nil {
				t.Fatalf("sync: %v", err)
			}
			f.mu.Lock()
			statuses := f.statuses
			f.mu.Unlock()
			if len(statuses) != 1 {
				t.Fatalf("%d status writes, want 1", len(statuses))
			}
			st := statuses[0]
			if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonDependencyNotReady {
				t.Errorf("Ready = %+v, want reason %s", c, v1alpha1.ReasonDependencyNotReady)
			}
			if got := st.HealthCheckStartTime != nil; got != tc.wantStart {
				t.Errorf("healthCheckStartTime = %v, want it kept: %v", st.HealthCheckStartTime, tc.wantStart)
			}
		})
	}
}

// readsCounted is a lister of VidraResources that counts the resources
// read, by namespace.
type readsCounted struct {
	listers.VidraResourceLister
	reads map[string]int
}

func (l *readsCounted) VidraResources(ns string) listers.VidraResourceNamespaceLister {
	return readsCountedIn{l.VidraResourceLister.VidraResources(ns), l, ns}
}

type readsCountedIn struct {
	listers.VidraResourceNamespaceLister
	l  *readsCounted
	ns string
}

func (l readsCountedIn) Get(name string) (*v1alpha1.VidraResource, error) {
	l.l.reads[l.ns]++
	return l.VidraResourceNamespaceLister.Get(name)
}

// dependencyController is a controller that checks the dependencies of vrs,
// held in its informer's cache, counting what it reads.
func dependencyController(t *testing.T, allowCrossNamespace bool, vrs ...*v1alpha1.VidraResource) (*Controller, *readsCounted) {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, vr := range vrs {
		if err := idx.Add(vr); err != nil {
			t.Fatal(err)
		}
	}
	l := &readsCounted{VidraResourceLister: listers.NewVidraResourceLister(idx), reads: map[string]int{}}
	return &Controller{Wakes: &Wakes{lister: l}, opts: Options{AllowCrossNamespaceDependencies: allowCrossNamespace}}, l
}

func dependsOn(deps ...v1alpha1.DependencyReference) func(*v1alpha1.VidraResource) {
	return func(vr *v1alpha1.VidraResource) { vr.Spec.DependsOn = deps }
}

// notReady is the status of a resource its own reconcile left not Ready,
// for reason.
func notReady(reason string) func(*v1alpha1.VidraResource) {
	return func(vr *v1alpha1.VidraResource) {
		vr.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: reason, ObservedGeneration: vr.Generation}}
	}
}

// A cycle through another namespace, with cross-namespace dependencies
// off: team-a/x names team-b/y, which is refused on team-a/x, and team-b/y
// names team-a/v. Looking for a cycle from team-a/v used to follow that
// dependency and name team-b's resource to team-a (a cycle of
// team-a/v -> team-a/x -> team-b/y -> team-a/v). The walk now stays in
// team-a: team-a/v waits for team-a/x, and nothing of team-b is read.
func TestDependencyCycleWalkStaysInTheNamespace(t *testing.T) {
	v := newVR("team-a", "v", configMapManifest, dependsOn(v1alpha1.DependencyReference{Name: "x"}))
	x := newVR("team-a", "x", configMapManifest, dependsOn(v1alpha1.DependencyReference{Namespace: "team-b", Name: "y"}),
		notReady(v1alpha1.ReasonDependencyRefused))
	y := newVR("team-b", "y", configMapManifest, dependsOn(v1alpha1.DependencyReference{Namespace: "team-a", Name: "v"}))
	for _, tc := range []struct {
		name        string
		allow       bool
		wantReason  string
		wantMessage string
	}{
		{name: "cross-namespace dependencies off", wantReason: v1alpha1.ReasonDependencyNotReady,
			wantMessage: "VidraResource team-a/x is not Ready (DependencyRefused)"},
		{name: "cross-namespace dependencies allowed", allow: true, wantReason: v1alpha1.ReasonDependencyCycle,
			wantMessage: "team-a/v -> team-a/x -> team-b/y -> team-a/v"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, l := dependencyController(t, tc.allow, v, x, y)
			b := c.checkDependencies(v)
			if b == nil {
				t.Fatal("team-a/v may apply; want it blocked")
			}
			if b.reason != tc.wantReason || !strings.Contains(b.message, tc.wantMessage) {
				t.Errorf("blocked for %s: %q; want %s, saying %q", b.reason, b.message, tc.wantReason, tc.wantMessage)
			}
			if !tc.allow && (strings.Contains(b.message, "team-b") || l.reads["team-b"] > 0) {
				t.Errorf("team-a's resource was told %q, after %d reads in team-b; want nothing of team-b", b.message, l.reads["team-b"])
			}
		})
	}
}

// A look for a cycle reads at most maxCycleWalk dependencies, however large
// the graph. Here 2,000 resources each depend on the next 64, and the last
// on the first: a cycle longer than the walk reads, reported as its
// members waiting for one another. Unbounded, the look read 1,999
// resources (and 128,000 dependencies) and named all 2,000 in the cycle.
func TestDependencyCycleWalkIsBounded(t *testing.T) {
	const n = 2000
	name := func(i int) string { return fmt.Sprintf("r%04d", i%n) }
	vrs := make([]*v1alpha1.VidraResource, n)
	for i := range vrs {
		var deps []v1alpha1.DependencyReference
		for j := i + 1; j <= i+64 && (j < n || i == n-1); j++ {
			deps = append(deps, v1alpha1.DependencyReference{Name: name(j)})
		}
		vrs[i] = newVR("team-a", name(i), configMapManifest, dependsOn(deps...))
	}
	c, l := dependencyController(t, false, vrs...)
	switch b := c.checkDependencies(vrs[0]); {
	case b == nil:
		t.Errorf("%s may apply; want it blocked for %s", vrs[0].Name, v1alpha1.ReasonDependencyNotReady)
	case b.reason != v1alpha1.ReasonDependencyNotReady:
		t.Errorf("blocked for %s (a message of %d bytes); want %s", b.reason, len(b.message), v1alpha1.ReasonDependencyNotReady)
	}
	// What the walk read, and the 64 dependencies whose readiness the
	// message reports.
	if got, most := l.reads["team-a"], maxCycleWalk+len(vrs[0].Spec.DependsOn); got > most {
		t.Errorf("%d resources read for one look; want at most %d", got, most)
	}

	// A cycle within the bound is still found, from each member.
	small := []*v1alpha1.VidraResource{
		newVR("team-a", "a", configMapManifest, dependsOn(v1alpha1.DependencyReference{Name: "b"})),
		newVR("team-a", "b", configMapManifest, dependsOn(v1alpha1.DependencyReference{Name: "c"})),
		newVR("team-a", "c", configMapManifest, dependsOn(v1alpha1.DependencyReference{Name: "a"})),
	}
	c, _ = dependencyController(t, false, small...)
	for _, vr := range small {
		if b := c.checkDependencies(vr); b == nil || b.reason != v1alpha1.ReasonDependencyCycle {
			t.Errorf("%s blocked %+v; want %s", vr.Name, b, v1alpha1.ReasonDependencyCycle)
		}
	}
}

// A change of a resource's readiness wakes the resources that depend on it,
// those of other namespaces only when such dependencies are allowed: they
// are refused otherwise, whatever the resource does, and waking them is
// work for nothing.
func TestReadinessWakesDependentsOfOtherNamespacesOnlyWhenAllowed(t *testing.T) {
	v := newVR("team-a", "v", configMapManifest)
	w := newVR("team-a", "w", configMapManifest, dependsOn(v1alpha1.DependencyReference{Name: "v"}))
	y := newVR("team-b", "y", configMapManifest, dependsOn(v1alpha1.DependencyReference{Namespace: "team-a", Name: "v"}))
	for _, allow := range []bool{false, true} {
		f := newFixture(t, []*v1alpha1.VidraResource{v, w, y})
		c := f.newController()
		c.opts.AllowCrossNamespaceDependencies = allow
		c.wakeDependents(v)
		var woken []string
		for c.queue.Len() > 0 {
			it, _ := c.queue.Get()
			woken = append(woken, it.Key.String())
			c.queue.Done(it)
		}
		slices.Sort(woken)
		want := []string{"team-a/w"}
		if allow {
			want = []string{"team-a/w", "team-b/y"}
		}
		if !slices.Equal(woken, want) {
			t.Errorf("cross-namespace dependencies allowed: %v; woken %v, want %v", allow, woken, want)
		}
	}
}

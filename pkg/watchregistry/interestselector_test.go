// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// foreignConfigMap is a ConfigMap the registry's selector does not select:
// someone else's, labelled with team.
func foreignConfigMap(ns, name, team string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": team}}}
}

// TestInterestBySelectorSeesObjectsOutsideTheRegistryScope: a registry
// scoped to the objects it manages wakes the owners of an interest by a
// label selector for objects of that selector it does not manage, through
// one informer shared by the owners, which charges the cluster's budget,
// which a change of the registry's scope leaves running and which stops
// once its last owner has left.
func TestInterestBySelectorSeesObjectsOutsideTheRegistryScope(t *testing.T) {
	c := newClients(t, controlPlane(t))
	ns := newNamespace(t, c.cs)
	in := watchregistry.NewInterests[string]()
	rec := &recorder{}
	r := startRegistry(t, c, watchregistry.Options[string]{Enqueue: rec.enqueue, Map: in.Map(testMap)})
	budget := watchregistry.NewBudget(100)
	r.SetCluster("", c.dyn, c.md, watchregistry.WithBudget(budget))

	interest := []watchregistry.Interest{{
		Ref:      watchregistry.Ref{GVR: configMaps, Namespace: ns},
		Selector: labels.SelectorFromSet(labels.Set{"team": "a"}),
	}}
	refs := in.Set("o1", interest)
	in.Set("o2", interest)
	if len(refs) != 1 || refs[0].LabelSelector != "team=a" {
		t.Fatalf("refs to track %v, want the namespace's configmaps selected by team=a", refs)
	}
	ref := refs[0]
	track(t, r, "o1", ref)
	track(t, r, "o2", ref)
	waitState(t, r, ref, watchregistry.StateSynced)
	if snap, _ := r.Snapshot(ref); snap.ServedBy != ref || snap.Owners != 2 {
		t.Fatalf("snapshot %+v, want one informer of the selector serving both owners", snap)
	}

	pos := rec.mark()
	createConfigMap(t, c.cs, foreignConfigMap(ns, "other-team", "b"))
	createConfigMap(t, c.cs, foreignConfigMap(ns, "team-a", "a"))
	for _, owner := range []string{"o1", "o2"} {
		rec.waitAfter(t, pos, "the add of team-a for "+owner, func(rec record) bool {
			return rec.key == owner && isEvent(watchregistry.EventAdded, "team-a")(rec)
		})
	}
	// team-a was created after other-team: its event is the barrier.
	if n := len(filterRecords(rec.since(pos), forObject("other-team"))); n != 0 {
		t.Fatalf("%d events of a ConfigMap the selector does not select:\n%s", n, rec.dump(pos))
	}
	if _, err := r.Get(ref, ns, "team-a"); err != nil {
		t.Fatalf("Get of the selected ConfigMap: %v", err)
	}
	if n := budget.Used(); n != 1 {
		t.Fatalf("the cluster's budget holds %d objects, want the one the selector selects", n)
	}

	// A new scope of the registry restarts its own informers, not this one.
	if err := r.SetLabelSelectors(managedBy + "=someone-else"); err != nil {
		t.Fatal(err)
	}
	if st := r.State(ref); st != watchregistry.StateSynced {
		t.Fatalf("state %s after the registry's scope changed, want Synced", st)
	}
	pos = rec.mark()
	patchConfigMap(t, c.cs, ns, "team-a", `{"data":{"k":"v"}}`)
	rec.waitAfter(t, pos, "the update of team-a", isEvent(watchregistry.EventUpdated, "team-a"))

	in.Forget("o1")
	r.Forget("o1")
	if st := r.State(ref); st != watchregistry.StateSynced {
		t.Fatalf("state %s with one owner left, want Synced", st)
	}
	in.Forget("o2")
	r.Forget("o2")
	waitState(t, r, ref, watchregistry.StateNotTracked)
	if n := budget.Used(); n != 0 {
		t.Fatalf("the cluster's budget holds %d objects once the informer stopped, want 0", n)
	}
	if snaps := r.Snapshots(); len(snaps) != 0 {
		t.Fatalf("informers left once the interests are gone: %+v", snaps)
	}
}

func TestRefWithAnInvalidSelectorIsRefused(t *testing.T) {
	r, err := watchregistry.New(watchregistry.Options[string]{
		Map:     func(watchregistry.Event) []string { return nil },
		Enqueue: func(string, watchregistry.Event) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, sel := range []string{"b=2,a=1", "a in (x", "a = 1"} {
		if err := r.Track("o", []watchregistry.Ref{{GVR: configMaps, LabelSelector: sel}}); err == nil {
			t.Errorf("Track of a ref selected by %q succeeded, want an error", sel)
		}
	}
	// Canonical, and too long for a request's URL.
	var values []string
	for i := range watchregistry.MaxRefSelectorBytes / 6 {
		values = append(values, fmt.Sprintf("v%04d", i))
	}
	long := "a in (" + strings.Join(values, ",") + ")"
	if sel, err := labels.Parse(long); err != nil || sel.String() != long {
		t.Fatalf("the long selector is not canonical: %v", err)
	}
	if err := r.Track("o", []watchregistry.Ref{{GVR: configMaps, LabelSelector: long}}); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("Track of a ref with a selector of %d bytes: %v, want it refused for its size", len(long), err)
	}
	// No cluster was given: the canonical selector passes, the cluster fails.
	if err := r.Track("o", []watchregistry.Ref{{GVR: configMaps, LabelSelector: "a=1,b=2"}}); err == nil || strings.Contains(err.Error(), "selector") {
		t.Fatalf("Track of a canonical selector: %v, want the unknown cluster's error", err)
	}
}

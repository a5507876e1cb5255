// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestInterestsHoldLittlePerObject pins what the index keeps per object an
// owner names, the common case of one owner per object: an operator keeps
// one entry for each object of each of its resources (Vidra: 4,000 at the
// bench's 1,000 VidraResources of four objects). A set of owners per object
// and a copy of each Interest took some 800 bytes an object.
func TestInterestsHoldLittlePerObject(t *testing.T) {
	const owners, perOwner = 1000, 4
	type key struct{ namespace, name string }
	gvrs := []schema.GroupVersionResource{
		{Version: "v1", Resource: "configmaps"}, {Version: "v1", Resource: "services"},
		{Group: "apps", Version: "v1", Resource: "deployments"}, {Version: "v1", Resource: "serviceaccounts"},
	}
	// The interests' strings exist before the index, as those of the
	// manifests an operator reads them from: only the index is measured.
	sets := make([][]Interest, owners)
	for o := range sets {
		ns := fmt.Sprintf("tenant-%d", o)
		for i := range perOwner {
			sets[o] = append(sets[o], Interest{Ref: Ref{GVR: gvrs[i]}, Namespace: ns, Name: fmt.Sprintf("object-%d", i)})
		}
	}
	before := liveHeap()
	in := NewInterests[key]()
	for _, set := range sets {
		in.Set(key{set[0].Namespace, "resource"}, set)
	}
	held := liveHeap() - before
	runtime.KeepAlive(in)
	runtime.KeepAlive(sets)

	perObject := held / (owners * perOwner)
	t.Logf("%d bytes for %d objects: %d bytes an object", held, owners*perOwner, perObject)
	if perObject > 400 {
		t.Fatalf("the index holds %d bytes an object, want at most 400", perObject)
	}
	if !in.WantsByName(key{"tenant-7", "resource"}, Ref{GVR: gvrs[2]}, "tenant-7", "object-2") {
		t.Fatal("the index lost an interest")
	}
}

// liveHeap is the heap the program holds after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestAnObjectSharedByOwnersKeepsEachUntilItForgets covers the owners past
// the first, which the index keeps apart from it.
func TestAnObjectSharedByOwnersKeepsEachUntilItForgets(t *testing.T) {
	secrets := Ref{GVR: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: "a"}
	db := []Interest{{Ref: secrets, Name: "db"}, {Ref: secrets, Name: "db"}}
	in := NewInterests[string]()
	for _, owner := range []string{"first", "second", "third"} {
		in.Set(owner, db)
	}
	wants := func() (out []string) {
		for _, owner := range []string{"first", "second", "third"} {
			if in.WantsByName(owner, secrets, "a", "db") {
				out = append(out, owner)
			}
		}
		return out
	}
	for _, step := range []struct {
		forget string
		want   []string
	}{
		{"first", []string{"second", "third"}},
		{"third", []string{"second"}},
		{"first", []string{"second"}},
		{"second", nil},
	} {
		in.Forget(step.forget)
		if got := wants(); !slices.Equal(got, step.want) {
			t.Fatalf("after forgetting %s: wanted by %v, want %v", step.forget, got, step.want)
		}
	}
	if len(in.resources) != 0 || len(in.owners) != 0 {
		t.Fatalf("index keeps forgotten owners: %d resources, %d owners", len(in.resources), len(in.owners))
	}
}

// TestInterestsAgreeWithAPlainSetOfInterests replays random Sets and
// Forgets of owners that share objects, and checks every answer against a
// plain map of who wants what.
func TestInterestsAgreeWithAPlainSetOfInterests(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gvrs := []schema.GroupVersionResource{{Version: "v1", Resource: "configmaps"}, {Group: "apps", Version: "v1", Resource: "deployments"}}
	owners := []string{"a", "b", "c", "d"}
	type object struct {
		gvr             schema.GroupVersionResource
		namespace, name string
	}
	var objects []object
	for _, gvr := range gvrs {
		for _, name := range []string{"x", "y", "z"} {
			objects = append(objects, object{gvr, "ns", name})
		}
	}
	in := NewInterests[string]()
	model := map[string]map[object]bool{}
	for step := range 2000 {
		owner := owners[rng.IntN(len(owners))]
		if rng.IntN(4) == 0 {
			in.Forget(owner)
			delete(model, owner)
		} else {
			var set []Interest
			model[owner] = map[object]bool{}
			for range rng.IntN(4) {
				o := objects[rng.IntN(len(objects))]
				set = append(set, Interest{Ref: Ref{GVR: o.gvr, Namespace: o.namespace}, Name: o.name})
				model[owner][o] = true
			}
			in.Set(owner, set)
		}
		for _, o := range objects {
			var want []string
			for _, w := range owners {
				got := in.WantsByName(w, Ref{GVR: o.gvr}, o.namespace, o.name)
				if got != model[w][o] {
					t.Fatalf("step %d: WantsByName(%s, %v) = %v, want %v", step, w, o, got, model[w][o])
				}
				if got {
					want = append(want, w)
				}
			}
			u := &unstructured.Unstructured{}
			u.SetNamespace(o.namespace)
			u.SetName(o.name)
			got := in.Owners(Event{Ref: Ref{GVR: o.gvr}, Object: u})
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: Owners(%v) = %v, want %v", step, o, got, want)
			}
		}
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestInterestsMapEventsToInterestedOwners(t *testing.T) {
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	inA := Ref{GVR: secrets, Namespace: "a"}
	all := Ref{GVR: secrets}
	remote := Ref{Cluster: "east", GVR: secrets, Namespace: "a"}
	obj := func(ns, name string, lbls map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(lbls)
		return u
	}
	web := labels.SelectorFromSet(labels.Set{"tier": "web"})

	in := NewInterests[string]()
	if refs := in.Set("cm-1", []Interest{{Ref: inA, Name: "db"}, {Ref: inA, Name: "tls"}}); !cmp.Equal(refs, []Ref{inA}) {
		t.Fatalf("refs to track: %v, want %v", refs, []Ref{inA})
	}
	in.Set("cm-2", []Interest{{Ref: inA, Name: "db"}})
	in.Set("web", []Interest{{Ref: all, Selector: web}})
	in.Set("every-secret-of-b", []Interest{{Ref: all, Namespace: "b"}})
	in.Set("remote", []Interest{{Ref: remote, Name: "db"}})
	in.Set("gone", []Interest{{Ref: inA, Name: "db"}})
	in.Set("gone", nil)

	tests := []struct {
		name string
		ev   Event
		want []string
	}{
		{"a named object wakes every owner naming it", Event{Ref: inA, Object: obj("a", "db", nil)}, []string{"cm-1", "cm-2"}},
		{"through an all-namespaces informer too", Event{Ref: all, Object: obj("a", "tls", nil)}, []string{"cm-1"}},
		{"the same name in another namespace wakes no one", Event{Ref: all, Object: obj("c", "db", nil)}, nil},
		{"the same name in another cluster wakes its owner only", Event{Ref: remote, Object: obj("a", "db", nil)}, []string{"remote"}},
		{"a selector matches the labels", Event{Ref: all, Object: obj("c", "x", map[string]string{"tier": "web"})}, []string{"web"}},
		{"an object leaving the selection wakes its owner", Event{Ref: all, Object: obj("c", "x", nil), Old: obj("c", "x", map[string]string{"tier": "web"})}, []string{"web"}},
		{"a namespace interest selects the namespace", Event{Ref: all, Object: obj("b", "x", nil)}, []string{"every-secret-of-b"}},
		{"an interest of another resource does not match", Event{Ref: Ref{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: "a"}, Object: obj("a", "db", nil)}, nil},
		{"an event without an object wakes no one by interest", Event{Ref: inA}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := in.Map(func(Event) []string { return []string{"cm-1"} })(tc.ev)
			want := tc.want
			if !slices.Contains(want, "cm-1") {
				want = append(slices.Clone(want), "cm-1") // next's owner, once
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("owners %v, want %v", got, want)
			}
		})
	}

	in.Forget("cm-1")
	in.Forget("cm-2")
	if got := in.Owners(Event{Ref: inA, Object: obj("a", "db", nil)}); len(got) != 0 {
		t.Fatalf("owners after Forget: %v", got)
	}
	names := 0
	for _, ri := range in.resources {
		names += len(ri.byName)
	}
	if names != 1 || len(in.owners) != 3 {
		t.Fatalf("index keeps forgotten owners: %d names, %d owners", names, len(in.owners))
	}
}

func TestWantsByNameAnswersForOneOwnerAndOneObject(t *testing.T) {
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	inA := Ref{GVR: secrets, Namespace: "a"}
	in := NewInterests[string]()
	in.Set("cm", []Interest{{Ref: inA, Name: "db"}, {Ref: Ref{GVR: secrets}, Namespace: "b"}})
	for _, tc := range []struct {
		name            string
		owner           string
		ref             Ref
		namespace, objN string
		want            bool
	}{
		{"the named object", "cm", inA, "a", "db", true},
		{"through an all-namespaces ref", "cm", Ref{GVR: secrets}, "a", "db", true},
		{"another owner", "other", inA, "a", "db", false},
		{"another name", "cm", inA, "a", "tls", false},
		{"another cluster", "cm", Ref{Cluster: "east", GVR: secrets}, "a", "db", false},
		{"an interest by namespace is not one by name", "cm", Ref{GVR: secrets}, "b", "x", false},
	} {
		if got := in.WantsByName(tc.owner, tc.ref, tc.namespace, tc.objN); got != tc.want {
			t.Errorf("%s: WantsByName = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// errDiscovery stands for a destination whose discovery is failing.
var errDiscovery = errors.New("the server is currently unable to handle the request")

// fakeScope knows the scope of a few built-in kinds, in every version, like a
// RESTMapper of a plain cluster; group "broken.example.com" fails as if
// discovery were down.
func fakeScope(gvk schema.GroupVersionKind) (bool, error) {
	switch gvk.GroupKind() {
	case schema.GroupKind{Kind: "ConfigMap"}, schema.GroupKind{Kind: "Service"}, schema.GroupKind{Kind: "Event"},
		schema.GroupKind{Group: "events.k8s.io", Kind: "Event"},
		schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "Role"}:
		return true, nil
	case schema.GroupKind{Kind: "Namespace"}, schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"},
		schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return false, nil
	}
	if gvk.Group == "broken.example.com" {
		return false, fmt.Errorf("discovery of %s: %w", gvk.GroupVersion(), errDiscovery)
	}
	return false, &meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
}

// mustParse parses a manifest that a test expects to be valid.
func mustParse(t *testing.T, manifest string) []Object {
	t.Helper()
	objs, errs := Parse(manifest)
	if len(errs) > 0 {
		t.Fatalf("Parse() errors: %v", errs)
	}
	return objs
}

// describeAll lists objects as "index Kind namespace/name", or
// "index Kind name" when they have no namespace.
func describeAll(objs []Object) []string {
	var out []string
	for _, o := range objs {
		s := fmt.Sprintf("%d %s ", o.Index, o.Object.GetKind())
		if ns, found := namespaceField(o); found {
			s += ns + "/"
		}
		out = append(out, s+o.Object.GetName())
	}
	return out
}

// namespaceField returns metadata.namespace and whether the field is there
// at all, to tell a removed field from an empty one.
func namespaceField(o Object) (string, bool) {
	meta, _ := o.Object.Object["metadata"].(map[string]any)
	ns, found := meta["namespace"]
	s, _ := ns.(string)
	return s, found
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name     string
		manifest string
		// defaultNamespace is "default" unless noDefault is set.
		noDefault bool
		want      []string
		wantErrs  ErrorList
	}{
		{
			name: "namespaced objects without a namespace get the default one",
			manifest: `apiVersion: v1
kind: ConfigMap
metadata:
  name: a
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: b
  namespace: other
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: reader
---
apiVersion: v1
kind: Namespace
metadata:
  name: other
  namespace: ""
`,
			want: []string{"0 ConfigMap default/a", "1 ConfigMap other/b", "2 ClusterRole reader", "3 Namespace other"},
		},
		{
			name: "a cluster-scoped object with a namespace",
			manifest: `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: reader
  namespace: default
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
`,
			want: []string{"1 ConfigMap default/a"},
			wantErrs: ErrorList{{Index: 0, Line: 1, Field: "metadata.namespace", Reason: ReasonNamespaceNotAllowed,
				Message: `ClusterRole.rbac.authorization.k8s.io "reader" in namespace "default" is cluster-scoped and cannot have a namespace; remove namespace "default"`}},
		},
		{
			name: "the same object twice, once with the default namespace written out",
			manifest: `apiVersion: v1
kind: ConfigMap
metadata:
  name: a
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: default
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: b
`,
			want: []string{"2 ConfigMap default/b"},
			wantErrs: ErrorList{{Index: 1, Line: 6, Reason: ReasonDuplicateObject,
				Message: `ConfigMap "a" in namespace "default" is also document 1 (line 1); an object (API group, kind, namespace and name) may appear only once in a manifest`}},
		},
		{
			name: "one Event named in its two groups",
			manifest: `apiVersion: v1
kind: Event
metadata:
  name: e
---
apiVersion: events.k8s.io/v1
kind: Event
metadata:
  name: e
`,
			wantErrs: ErrorList{{Index: 1, Line: 6, Reason: ReasonDuplicateObject,
				Message: `Event.events.k8s.io "e" in namespace "default" is also document 1 (line 1); an object (API group, kind, namespace and name) may appear only once in a manifest`}},
		},
		{
			name: "the same object in two versions of its group",
			manifest: `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
---
apiVersion: apps/v1beta1
kind: Deployment
metadata:
  name: web
`,
			wantErrs: ErrorList{{Index: 1, Line: 6, Reason: ReasonDuplicateObject,
				Message: `Deployment.apps "web" in namespace "default" is also document 1 (line 1); an object (API group, kind, namespace and name) may appear only once in a manifest`}},
		},
		{
			name: "same names that are different objects",
			manifest: `apiVersion: v1
kind: ConfigMap
metadata:
  name: a
---
apiVersion: v1
kind: Service
metadata:
  name: a
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  namespace: other
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: a
`,
			want: []string{"0 ConfigMap default/a", "1 Service default/a", "2 ConfigMap other/a", "3 Role default/a"},
		},
		{
			name: "a kind the destination does not serve",
			manifest: `apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
`,
			want: []string{"1 ConfigMap default/a"},
			wantErrs: ErrorList{{Index: 0, Line: 2, Field: "kind", Reason: ReasonUnknownKind,
				Message: `the destination does not serve kind "Widget" of apiVersion "example.com/v1" (is its CustomResourceDefinition installed?)`}},
		},
		{
			name:     "a kind whose CustomResourceDefinition is in the manifest",
			manifest: crdManifest("Namespaced") + "---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n",
			want:     []string{"0 CustomResourceDefinition widgets.example.com", "1 Widget default/w"},
		},
		{
			name: "a kind whose apiextensions.k8s.io/v1beta1 definition is in the manifest",
			manifest: `apiVersion: apiextensions.k8s.io/v1beta1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  version: v1alpha1
  scope: Cluster
  names:
    kind: Gadget
    plural: gadgets
---
apiVersion: example.com/v1alpha1
kind: Gadget
metadata:
  name: g
`,
			want: []string{"0 CustomResourceDefinition gadgets.example.com", "1 Gadget g"},
		},
		{
			name:     "a cluster-scoped kind of the manifest given a namespace",
			manifest: crdManifest("Cluster") + "---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: default\n",
			want:     []string{"0 CustomResourceDefinition widgets.example.com"},
			wantErrs: ErrorList{{Index: 1, Line: 19, Field: "metadata.namespace", Reason: ReasonNamespaceNotAllowed,
				Message: `Widget.example.com "w" in namespace "default" is cluster-scoped and cannot have a namespace; remove namespace "default"`}},
		},
		{
			name:     "a version the manifest's CustomResourceDefinition does not define",
			manifest: crdManifest("Namespaced") + "---\napiVersion: example.com/v2\nkind: Widget\nmetadata:\n  name: w\n",
			want:     []string{"0 CustomResourceDefinition widgets.example.com"},
			wantErrs: ErrorList{{Index: 1, Line: 20, Field: "kind", Reason: ReasonUnknownKind,
				Message: `the destination does not serve kind "Widget" of apiVersion "example.com/v2" (is its CustomResourceDefinition installed?)`}},
		},
		{
			name:     "discovery failing",
			manifest: "apiVersion: broken.example.com/v1\nkind: Gadget\nmetadata:\n  name: g\n",
			wantErrs: ErrorList{{Index: 0, Line: 2, Field: "kind", Reason: ReasonDiscoveryFailed,
				Message: `cannot tell whether Gadget of apiVersion "broken.example.com/v1" is namespaced: discovery of broken.example.com/v1: the server is currently unable to handle the request`}},
		},
		{
			name:      "no default namespace",
			manifest:  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
			noDefault: true,
			wantErrs: ErrorList{{Index: 0, Line: 1, Field: "metadata.namespace", Reason: ReasonInvalidManifest,
				Message: `ConfigMap "a" is namespaced but has no namespace, and there is no default namespace`}},
		},
		{
			name: "every error at once, in manifest order",
			manifest: `apiVersion: v1
kind: ConfigMap
metadata:
  name: a
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
---
apiVersion: v1
kind: Namespace
metadata:
  name: ns
  namespace: default
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: fine
`,
			want: []string{"4 ConfigMap default/fine"},
			wantErrs: ErrorList{
				{Index: 1, Line: 7, Field: "kind", Reason: ReasonUnknownKind,
					Message: `the destination does not serve kind "Widget" of apiVersion "example.com/v1" (is its CustomResourceDefinition installed?)`},
				{Index: 2, Line: 11, Field: "metadata.namespace", Reason: ReasonNamespaceNotAllowed,
					Message: `Namespace "ns" in namespace "default" is cluster-scoped and cannot have a namespace; remove namespace "default"`},
				{Index: 3, Line: 17, Reason: ReasonDuplicateObject,
					Message: `ConfigMap "a" in namespace "default" is also document 1 (line 1); an object (API group, kind, namespace and name) may appear only once in a manifest`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := mustParse(t, tt.manifest)
			before := make([]Object, len(objs))
			for i, o := range objs {
				before[i] = Object{Index: o.Index, Line: o.Line, KindLine: o.KindLine, Object: o.Object.DeepCopy()}
			}
			ns := "default"
			if tt.noDefault {
				ns = ""
			}

			got, errs := Resolve(objs, ns, fakeScope)

			if diff := cmp.Diff(tt.wantErrs, errs, errorCmp); diff != "" {
				t.Errorf("Resolve() errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, describeAll(got)); diff != "" {
				t.Errorf("Resolve() objects (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, objs); diff != "" {
				t.Errorf("Resolve() changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

// crdManifest is a CustomResourceDefinition of Widget.example.com, v1 only,
// 17 lines long.
func crdManifest(scope string) string {
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: ` + scope + `
  names:
    kind: Widget
    plural: widgets
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
`
}

// TestResolveErrorsKeepTheirCause checks that a caller can tell a kind that
// is not served yet from a failing discovery through the error chain.
func TestResolveErrorsKeepTheirCause(t *testing.T) {
	objs := mustParse(t, "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n---\napiVersion: broken.example.com/v1\nkind: Gadget\nmetadata:\n  name: g\n")
	_, errs := Resolve(objs, "default", fakeScope)
	if len(errs) != 2 {
		t.Fatalf("Resolve() errors = %v, want 2", errs)
	}
	if !meta.IsNoMatchError(errs[0]) || meta.IsNoMatchError(errs[1]) {
		t.Errorf("meta.IsNoMatchError of each error = %t, %t; want true, false", meta.IsNoMatchError(errs[0]), meta.IsNoMatchError(errs[1]))
	}
	if !errors.Is(errs.Err(), errDiscovery) {
		t.Errorf("errors.Is(errs.Err(), errDiscovery) = false, want true")
	}
	if !meta.IsNoMatchError(errs.Err()) {
		t.Errorf("meta.IsNoMatchError(errs.Err()) = false, want true")
	}
	if !errs.Transient() {
		t.Errorf("Transient() = false for unknown kinds and failing discovery, want true")
	}
}

func TestErrorListTransient(t *testing.T) {
	tests := []struct {
		name    string
		reasons []string
		want    bool
	}{
		{"no errors", nil, false},
		{"unknown kinds only", []string{ReasonUnknownKind, ReasonUnknownKind}, true},
		{"discovery failing", []string{ReasonDiscoveryFailed, ReasonUnknownKind}, true},
		{"an unknown kind and a duplicate", []string{ReasonUnknownKind, ReasonDuplicateObject}, false},
		{"invalid manifest", []string{ReasonInvalidManifest}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l ErrorList
			for i, r := range tt.reasons {
				l = append(l, &Error{Index: i, Reason: r})
			}
			if got := l.Transient(); got != tt.want {
				t.Errorf("Transient() = %t, want %t", got, tt.want)
			}
		})
	}
}

// TestResolveReturnsCopies checks that changing a resolved object leaves the
// parsed one alone, as the caller adds Vidra's marks to what it applies.
func TestResolveReturnsCopies(t *testing.T) {
	objs := mustParse(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: {app: a}\n")
	got, errs := Resolve(objs, "default", fakeScope)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got[0].Object.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "vidra"})
	if diff := cmp.Diff(map[string]string{"app": "a"}, objs[0].Object.GetLabels()); diff != "" {
		t.Errorf("parsed object changed (-want +got):\n%s", diff)
	}
}

// suggesting is a ScopeFunc's no-match error that knows what was meant.
type suggesting struct{ error }

func (suggesting) KindSuggestion() string { return `it serves Deployment as apiVersion "apps/v1"` }
func (s suggesting) Unwrap() error        { return s.error }

func TestResolveSaysWhatAnUnservedKindMeant(t *testing.T) {
	objs := mustParse(t, "apiVersion: apps/v1beta1\nkind: Deployment\nmetadata:\n  name: web\n")
	scope := func(gvk schema.GroupVersionKind) (bool, error) {
		return false, suggesting{&meta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}}
	}
	_, errs := Resolve(objs, "default", scope)
	want := `document 1 (line 2): kind: the destination does not serve kind "Deployment" of apiVersion "apps/v1beta1": it serves Deployment as apiVersion "apps/v1"`
	if len(errs) != 1 || errs[0].Error() != want || errs[0].Reason != ReasonUnknownKind || !meta.IsNoMatchError(errs[0]) {
		t.Fatalf("errors %v, want one UnknownKind: %s", errs, want)
	}
}

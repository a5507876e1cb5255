// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// olderSample is the manifest of the earlier Vidra operator's documentation.
const olderSample = `---
apiVersion: v1
kind: Namespace
metadata:
  name: ns-example
---
apiVersion: v1
kind: Service
metadata:
  name: svc-example
  namespace: ns-example
spec:
  ports:
    - port: 80
      name: http
  selector:
    app: l-example
`

// specSample is the VidraResource of SPEC.md §2; specSampleManifest is its
// spec.manifest.
const (
	specSample = `apiVersion: infrahub.operators.com/v1alpha1
kind: VidraResource
metadata:
  name: vidraresource-sample
spec:
  destination:
    namespace: default
    reconcileOnEvents: true
  manifest: '{"apiVersion": "v1","kind": "Namespace","metadata":{"name": "ns-sample"}}'
`
	specSampleManifest = `{"apiVersion": "v1","kind": "Namespace","metadata":{"name": "ns-sample"}}`
)

// obj builds an expected Object.
func obj(index, line int, o map[string]any) Object {
	return Object{Index: index, Line: line, Object: &unstructured.Unstructured{Object: o}}
}

// named returns a minimal object of a kind.
func named(apiVersion, kind, namespace, name string) map[string]any {
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
}

// invalid builds an expected InvalidManifest error.
func invalid(index, line int, field, msg string) *Error {
	return &Error{Index: index, Line: line, Field: field, Reason: ReasonInvalidManifest, Message: msg}
}

var errorCmp = cmpopts.IgnoreUnexported(Error{})

// TestParseAliasBombIsRefused checks that a "billion laughs" manifest fails
// fast instead of expanding to gigabytes.
func TestParseAliasBombIsRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\n")
	b.WriteString(`a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	for c := 'b'; c <= 'i'; c++ {
		prev := string(c - 1)
		fmt.Fprintf(&b, "%c: &%c [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n", c, c, prev, prev, prev, prev, prev, prev, prev, prev, prev)
	}
	objs, errs := Parse(b.String())
	if len(objs) != 0 {
		t.Errorf("Parse() returned %d objects, want none", len(objs))
	}
	if len(errs) != 1 || errs[0].Reason != ReasonInvalidManifest || !strings.Contains(errs[0].Message, "aliases expand to too much data") {
		t.Errorf("Parse() errors = %v, want one about aliases expanding too much", errs)
	}
}

// TestParseMergeKeyBombIsRefused checks that merge keys, which expand a list
// of mappings without an alias on each, are bounded too.
func TestParseMergeKeyBombIsRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\n")
	b.WriteString("base: &base [{")
	for i := range 1000 {
		fmt.Fprintf(&b, "k%d: %s, ", i, strings.Repeat("v", 20))
	}
	b.WriteString("}]\ncopies:\n")
	// 8000 copies of 1000 keys expand to 8 million entries, yet stay under
	// MaxNodes, so that it is the alias budget that refuses them.
	for i := range 8000 {
		fmt.Fprintf(&b, "  - {<<: *base, n: %d}\n", i)
	}
	_, errs := Parse(b.String())
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "aliases expand to too much data") {
		t.Errorf("Parse() errors = %v, want one about aliases expanding too much", errs)
	}
}

// TestParseTestdata parses the realistic manifests of testdata/.
func TestParseTestdata(t *testing.T) {
	tests := []struct {
		file string
		want []string // kind/name of each object, in order
	}{
		{"app.yaml", []string{"Namespace/shop", "ConfigMap/web", "Service/web", "Deployment/web", "ServiceAccount/web"}},
		{"crd-and-cr.yaml", []string{"CustomResourceDefinition/widgets.example.com", "Widget/first", "Widget/second"}},
		{"list.json", []string{"ConfigMap/a", "Secret/b", "ClusterRole/reader"}},
		{"webhook.yaml", []string{"ValidatingWebhookConfiguration/policy", "Service/policy", "Deployment/policy"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			objs, errs := Parse(string(data))
			if len(errs) > 0 {
				t.Fatalf("Parse() errors: %v", errs)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.Object.GetKind()+"/"+o.Object.GetName())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse() objects (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseObjectsAreIndependent checks that values reached through an alias
// are copies: changing one object must not change another place.
func TestParseObjectsAreIndependent(t *testing.T) {
	objs, errs := Parse("apiVersion: v1\nkind: X\nmetadata:\n  name: a\n  labels: &l {app: a}\nspec:\n  selector: *l\n")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	u := objs[0].Object
	labels := u.GetLabels()
	labels["vidra"] = "mark"
	u.SetLabels(labels)
	sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector")
	if diff := cmp.Diff(map[string]string{"app": "a"}, sel); diff != "" {
		t.Errorf("selector changed with the labels (-want +got):\n%s", diff)
	}
}

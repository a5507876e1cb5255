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

// TestKindLineIsTheLineOfTheKindKey: an error about a kind points at the
// line that names it, not at the object's first key.
func TestKindLineIsTheLineOfTheKindKey(t *testing.T) {
	objs, errs := Parse("apiVersion: v1\nkind: ConfgMap\nmetadata:\n  name: a\n---\n# c\nmetadata:\n  name: b\napiVersion: v1\nkind: ConfigMap\n")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if objs[0].Line != 1 || objs[0].KindLine != 2 || objs[1].Line != 7 || objs[1].KindLine != 10 {
		t.Errorf("lines (object, kind) = (%d, %d), (%d, %d); want (1, 2), (7, 10)", objs[0].Line, objs[0].KindLine, objs[1].Line, objs[1].KindLine)
	}
}

func TestParseValidManifests(t *testing.T) {
	tests := []struct {
		name     string
		manifest string
		want     []Object
	}{
		{
			name: "single YAML document",
			manifest: `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels:
    app: web
spec:
  replicas: 3
  paused: false
  template:
    spec:
      containers:
        - name: web
          image: nginx:1.27
          resources:
            limits:
              cpu: 0.5
`,
			want: []Object{obj(0, 1, map[string]any{
				"apiVersion": "apps/v1",
				"kind":       "Deployment",
				"metadata":   map[string]any{"name": "web", "namespace": "shop", "labels": map[string]any{"app": "web"}},
				"spec": map[string]any{
					"replicas": int64(3),
					"paused":   false,
					"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
						"name":      "web",
						"image":     "nginx:1.27",
						"resources": map[string]any{"limits": map[string]any{"cpu": 0.5}},
					}}}},
				},
			})},
		},
		{
			name: "multiple documents with comments and empty documents",
			manifest: `# A header comment before the first separator.
---
# Only a comment.
---
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
--- # a separator with a comment

---
   
---
# The second object starts after this comment.
apiVersion: v1
kind: ConfigMap
metadata:
  name: b
...
---
`,
			want: []Object{
				obj(0, 6, named("v1", "ConfigMap", "", "a")),
				obj(1, 16, named("v1", "ConfigMap", "", "b")),
			},
		},
		{
			name:     "the older operator's sample",
			manifest: olderSample,
			want: []Object{
				obj(0, 2, named("v1", "Namespace", "", "ns-example")),
				obj(1, 7, map[string]any{
					"apiVersion": "v1",
					"kind":       "Service",
					"metadata":   map[string]any{"name": "svc-example", "namespace": "ns-example"},
					"spec": map[string]any{
						"ports":    []any{map[string]any{"port": int64(80), "name": "http"}},
						"selector": map[string]any{"app": "l-example"},
					},
				}),
			},
		},
		{
			name:     "SPEC sample VidraResource",
			manifest: specSample,
			want: []Object{obj(0, 1, map[string]any{
				"apiVersion": "infrahub.operators.com/v1alpha1",
				"kind":       "VidraResource",
				"metadata":   map[string]any{"name": "vidraresource-sample"},
				"spec": map[string]any{
					"destination": map[string]any{"namespace": "default", "reconcileOnEvents": true},
					"manifest":    specSampleManifest,
				},
			})},
		},
		{
			name:     "SPEC sample manifest: one JSON object",
			manifest: specSampleManifest,
			want:     []Object{obj(0, 1, named("v1", "Namespace", "", "ns-sample"))},
		},
		{
			name: "JSON array",
			manifest: `
[
  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"n": "1"}},
  {
    "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b"},
    "data": {"k": "dmFsdWU="}, "immutable": true
  }
]`,
			want: []Object{
				obj(0, 3, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a"}, "data": map[string]any{"n": "1"}}),
				obj(1, 4, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "b"}, "data": map[string]any{"k": "dmFsdWU="}, "immutable": true}),
			},
		},
		{
			name:     "JSON numbers keep integers as int64",
			manifest: `{"apiVersion": "v1", "kind": "X", "metadata": {"name": "a"}, "i": 80, "f": 1.5, "e": 1e3, "big": 99999999999999999999, "n": null}`,
			want: []Object{obj(0, 1, map[string]any{
				"apiVersion": "v1", "kind": "X", "metadata": map[string]any{"name": "a"},
				"i": int64(80), "f": 1.5, "e": float64(1000), "big": 1e20, "n": nil,
			})},
		},
		{
			name: "JSON objects one after the other",
			manifest: `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}
[{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}]`,
			want: []Object{
				obj(0, 1, named("v1", "ConfigMap", "", "a")),
				obj(1, 2, named("v1", "ConfigMap", "", "b")),
				obj(2, 3, named("v1", "ConfigMap", "", "c")),
			},
		},
		{
			name: "v1 List in YAML",
			manifest: `apiVersion: v1
kind: List
metadata: {}
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: b
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: c
`,
			want: []Object{
				obj(0, 5, named("v1", "ConfigMap", "", "a")),
				obj(1, 9, named("v1", "ConfigMap", "", "b")),
				obj(2, 14, named("v1", "ServiceAccount", "", "c")),
			},
		},
		{
			name: "v1 List in JSON",
			manifest: `{
  "apiVersion": "v1",
  "kind": "List",
  "items": [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}
  ]
}`,
			want: []Object{
				obj(0, 5, named("v1", "ConfigMap", "", "a")),
				obj(1, 6, named("v1", "ConfigMap", "", "b")),
			},
		},
		{
			name: "typed list kind, as kubectl get -o yaml writes it",
			manifest: `apiVersion: v1
kind: ConfigMapList
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
`,
			want: []Object{obj(0, 4, named("v1", "ConfigMap", "", "a"))},
		},
		{
			name:     "empty List next to an object",
			manifest: "apiVersion: v1\nkind: List\nitems: []\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
			want:     []Object{obj(0, 5, named("v1", "ConfigMap", "", "a"))},
		},
		{
			name:     "a kind ending in List without items is an object",
			manifest: "apiVersion: example.com/v1\nkind: AllowList\nmetadata:\n  name: a\nspec:\n  entries: [x]\n",
			want: []Object{obj(0, 1, map[string]any{
				"apiVersion": "example.com/v1", "kind": "AllowList", "metadata": map[string]any{"name": "a"},
				"spec": map[string]any{"entries": []any{"x"}},
			})},
		},
		{
			name:     "content on the separator line",
			manifest: "--- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n--- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n",
			want: []Object{
				obj(0, 1, named("v1", "ConfigMap", "", "a")),
				obj(1, 2, named("v1", "ConfigMap", "", "b")),
			},
		},
		{
			name:     "YAML flow style that looks like JSON",
			manifest: "{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n",
			want:     []Object{obj(0, 1, named("v1", "ConfigMap", "", "a"))},
		},
		{
			name:     "JSON documents separated by ---",
			manifest: "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"a\"}}\n---\n[{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"b\"}},\n {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"c\"}}]\n",
			want: []Object{
				obj(0, 1, named("v1", "ConfigMap", "", "a")),
				obj(1, 3, named("v1", "ConfigMap", "", "b")),
				obj(2, 4, named("v1", "ConfigMap", "", "c")),
			},
		},
		{
			name: "YAML-only types become what JSON holds",
			manifest: `apiVersion: v1
kind: X
metadata:
  name: a
created: 2001-12-14t21:59:43.10-05:00
day: 2001-12-14
blob: !!binary aGVsbG8=
yes: yes
on: off
octal: 0o17
hex: 0x1F
big: 99999999999999999999
float: 6.02e+23
tagged: !custom value
quoted: "80"
nothing: ~
`,
			want: []Object{obj(0, 1, map[string]any{
				"apiVersion": "v1", "kind": "X", "metadata": map[string]any{"name": "a"},
				"created": "2001-12-14t21:59:43.10-05:00",
				"day":     "2001-12-14",
				"blob":    "aGVsbG8=",
				"yes":     "yes",
				"on":      "off",
				"octal":   int64(15),
				"hex":     int64(31),
				"big":     1e20,
				"float":   6.02e+23,
				"tagged":  "value",
				"quoted":  "80",
				"nothing": nil,
			})},
		},
		{
			name: "anchors, aliases and merge keys",
			manifest: `apiVersion: v1
kind: X
metadata:
  name: a
  labels: &labels
    app: web
    tier: front
defaults: &defaults
  replicas: 1
  image: nginx
extra: &extra
  image: ignored
  port: 80
one:
  <<: *defaults
  replicas: 3
two:
  <<: [*defaults, *extra]
selector: *labels
`,
			want: []Object{obj(0, 1, map[string]any{
				"apiVersion": "v1", "kind": "X",
				"metadata": map[string]any{"name": "a", "labels": map[string]any{"app": "web", "tier": "front"}},
				"defaults": map[string]any{"replicas": int64(1), "image": "nginx"},
				"extra":    map[string]any{"image": "ignored", "port": int64(80)},
				"one":      map[string]any{"replicas": int64(3), "image": "nginx"},
				"two":      map[string]any{"replicas": int64(1), "image": "nginx", "port": int64(80)},
				"selector": map[string]any{"app": "web", "tier": "front"},
			})},
		},
		{
			name:     "CRLF line endings",
			manifest: "apiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: a\r\n---\r\napiVersion: v1\r\nkind: ConfigMap\r\nmetadata:\r\n  name: b\r\n",
			want: []Object{
				obj(0, 1, named("v1", "ConfigMap", "", "a")),
				obj(1, 6, named("v1", "ConfigMap", "", "b")),
			},
		},
		{
			// Not JSON, but valid YAML flow style: the author's intent is clear.
			name:     "JSON with a trailing comma",
			manifest: "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"a\",},}",
			want:     []Object{obj(0, 1, named("v1", "ConfigMap", "", "a"))},
		},
		{
			name:     "byte order mark",
			manifest: "\uFEFF{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"a\"}}",
			want:     []Object{obj(0, 1, named("v1", "ConfigMap", "", "a"))},
		},
		{
			name:     "YAML directive",
			manifest: "%YAML 1.1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
			want:     []Object{obj(0, 3, named("v1", "ConfigMap", "", "a"))},
		},
		{
			name:     "a null namespace is dropped",
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace:\n",
			want:     []Object{obj(0, 1, named("v1", "ConfigMap", "", "a"))},
		},
		{
			name:     "separator-like text inside a block scalar",
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  script: |\n    echo one\n    ---\n    echo two\n",
			want: []Object{obj(0, 1, map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a"},
				"data": map[string]any{"script": "echo one\n---\necho two\n"},
			})},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := Parse(tt.manifest)
			if len(errs) > 0 {
				t.Fatalf("Parse() errors: %v", errs)
			}
			// KindLine has a test of its own.
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Object{}, "KindLine")); diff != "" {
				t.Errorf("Parse() objects (-want +got):\n%s", diff)
			}
			for i, o := range got {
				if o.Index != i {
					t.Errorf("object %d has Index %d; without errors indexes are positions", i, o.Index)
				}
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	tests := []struct {
		name     string
		manifest string
		want     ErrorList
		// wantObjects are the names of the objects returned beside the errors.
		wantObjects []string
	}{
		{
			name: "invalid YAML in one document, the others still parsed",
			manifest: `apiVersion: v1
kind: ConfigMap
metadata:
  name: a
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: b
  labels: {app: b
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: c
`,
			want:        ErrorList{invalid(1, 10, "", "invalid YAML: did not find expected ',' or '}'")},
			wantObjects: []string{"a", "c"},
		},
		{
			name: "bad indentation points at the offending line",
			manifest: `# comment
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  labels:
    app: a
   tier: b
`,
			want: ErrorList{invalid(0, 9, "", "invalid YAML: did not find expected key (the enclosing structure starts on line 6)")},
		},
		{
			name:     "mapping in a scalar",
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a: b\n",
			want:     ErrorList{invalid(0, 4, "", "invalid YAML: mapping values are not allowed in this context")},
		},
		{
			name:     "error on the first line",
			manifest: "a: b: c\n",
			want:     ErrorList{invalid(0, 1, "", "invalid YAML: mapping values are not allowed in this context")},
		},
		{
			name:     "unterminated quote at the end is reported on its last line",
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"a\n\n\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
			want:     ErrorList{invalid(0, 4, "", "invalid YAML: found unexpected end of stream")},
			// The quote is closed by nothing: the document ends at "---".
			wantObjects: []string{"b"},
		},
		{
			// YAML also breaks lines at a lone CR and at U+2028; people and
			// their tools count "\n".
			name:     "lines are counted by newline",
			manifest: "apiVersion: v1\rkind: ConfigMap\u2028metadata:\n  name: a\n  labels: {a: b: c}\n",
			want:     ErrorList{invalid(0, 3, "", "invalid YAML: did not find expected ',' or '}'")},
		},
		{
			name:     "tab indentation",
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n\tname: a\n",
			want:     ErrorList{invalid(0, 4, "", "invalid YAML: found character that cannot start any token")},
		},
		{
			name:     "control character",
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: \"a\x01b\"\n",
			want:     ErrorList{invalid(0, 6, "", "invalid YAML: control characters are not allowed")},
		},
		{
			name:     "invalid UTF-8",
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: \xff\n",
			want:     ErrorList{invalid(-1, 6, "", "manifest is not valid UTF-8")},
		},
		{
			name:     "UTF-16",
			manifest: "\xff\xfea\x00:\x00 \x00b\x00",
			want:     ErrorList{invalid(-1, 1, "", "manifest is not valid UTF-8")},
		},
		{
			name:     "unknown anchor",
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: *nowhere\n",
			want:     ErrorList{invalid(0, 5, "", "invalid YAML: unknown anchor 'nowhere' referenced")},
		},
		{
			name: "invalid JSON",
			manifest: `{
  "apiVersion": "v1",
  "kind": "ConfigMap",
  "metadata": {"name" "a"},
  "data": {}
}`,
			want: ErrorList{invalid(0, 4, "", "invalid JSON: invalid character '\"' after object key")},
		},
		{
			name: "invalid JSON in an array element",
			manifest: `[
  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}
  {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
]`,
			want:        ErrorList{invalid(2, 4, "", "invalid JSON: invalid character '{' after array element")},
			wantObjects: []string{"a", "b"},
		},
		{
			name:     "truncated JSON",
			manifest: "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"ConfigMap\"\n",
			want:     ErrorList{invalid(0, 3, "", "invalid JSON: unexpected end of JSON input")},
		},
		{
			name:     "JSON value that is not a document after an object",
			manifest: "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"a\"}}\n\"oops\"\n",
			want:     ErrorList{invalid(1, 2, "", "document is not an object but a string")},
			// the string is valid JSON, so it is reported as JSON.
			wantObjects: []string{"a"},
		},
		{
			name: "missing apiVersion, kind and name reported together, in every document",
			manifest: `metadata:
  labels:
    app: a
---
apiVersion: v1
kind: ConfigMap
---
apiVersion: v1
metadata:
  name: c
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ok
`,
			want: ErrorList{
				invalid(0, 1, "apiVersion", "required"),
				invalid(0, 1, "kind", "required"),
				invalid(0, 1, "metadata.name", "required"),
				invalid(1, 5, "metadata.name", "required"),
				invalid(2, 8, "kind", "required"),
			},
			wantObjects: []string{"ok"},
		},
		{
			name:     "generateName only",
			manifest: "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: migrate-\n",
			want: ErrorList{invalid(0, 1, "metadata.name",
				"required; generateName is not supported, as Vidra needs to know an object's name to prune it and to correct its drift")},
		},
		{
			name:     "documents that are not objects",
			manifest: "just a string\n---\n- a\n- list\n---\n42\n",
			want: ErrorList{
				invalid(0, 1, "", "document is not an object but a string"),
				invalid(1, 3, "", "document is not an object but a list"),
				invalid(2, 6, "", "document is not an object but a number"),
			},
		},
		{
			name:     "JSON array elements that are not objects",
			manifest: "[1, [], {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"a\"}}]",
			want: ErrorList{
				invalid(0, 1, "", "document is not an object but a number"),
				invalid(1, 1, "", "document is not an object but a list"),
			},
			wantObjects: []string{"a"},
		},
		{
			name:     "bad apiVersion",
			manifest: "apiVersion: apps/v1/extra\nkind: Deployment\nmetadata:\n  name: a\n---\napiVersion: apps/\nkind: Deployment\nmetadata:\n  name: b\n---\napiVersion: /v1\nkind: Deployment\nmetadata:\n  name: c\n---\napiVersion: 1\nkind: Deployment\nmetadata:\n  name: d\n",
			want: ErrorList{
				invalid(0, 1, "apiVersion", `"apps/v1/extra" is not a valid apiVersion: want "version" (such as "v1") or "group/version" (such as "apps/v1")`),
				invalid(1, 6, "apiVersion", `"apps/" is not a valid apiVersion: want "version" (such as "v1") or "group/version" (such as "apps/v1")`),
				invalid(2, 11, "apiVersion", `"/v1" is not a valid apiVersion: want "version" (such as "v1") or "group/version" (such as "apps/v1")`),
				invalid(3, 16, "apiVersion", "must be a string, not a number"),
			},
		},
		{
			name:     "names that can never be valid",
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a/b\n  namespace: ..\n",
			want: ErrorList{
				invalid(0, 4, "metadata.name", `"a/b" is not a valid name: it must not contain "/"`),
				invalid(0, 5, "metadata.namespace", `".." is not a valid name`),
			},
		},
		{
			name:     "metadata of the wrong types",
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: [a]\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: 3\n  labels:\n    app.kubernetes.io/name: b\n    replicas: 3\n    enabled: true\n  annotations: text\n",
			want: ErrorList{
				invalid(0, 3, "metadata", "must be an object, not a list"),
				invalid(1, 9, "metadata.namespace", "must be a string, not a number"),
				invalid(1, 12, `metadata.labels.replicas`, "must be a string, not a number"),
				invalid(1, 13, `metadata.labels.enabled`, "must be a string, not a boolean"),
				invalid(1, 14, "metadata.annotations", "must be an object of strings, not a string"),
			},
		},
		{
			name: "policy annotations with unknown keys and values",
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    vidra.infrahub.operators.com/apply: IfNotPresent\n    vidra.infrahub.operators.com/prune: Disabled\n---\n" +
				"apiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n  annotations:\n    vidra.infrahub.operators.com/prnue: disabled\n    vidra.infrahub.operators.com/apply: Never\n    vidra.infrahub.operators.com/force: enabled\n    example.com/apply: anything\n",
			want: ErrorList{
				invalid(0, 7, `metadata.annotations["vidra.infrahub.operators.com/prune"]`, `"Disabled" is not a value of this annotation: want disabled or enabled`),
				invalid(1, 14, `metadata.annotations["vidra.infrahub.operators.com/prnue"]`, "unknown Vidra annotation; the known ones are vidra.infrahub.operators.com/apply (IfNotPresent or Ignore), vidra.infrahub.operators.com/prune (disabled) and vidra.infrahub.operators.com/force (enabled)"),
				invalid(1, 15, `metadata.annotations["vidra.infrahub.operators.com/apply"]`, `"Never" is not a value of this annotation: want IfNotPresent or Ignore`),
			},
		},
		{
			name:     "duplicate keys in YAML",
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: one\n  k: two\n",
			want:     ErrorList{invalid(0, 7, "data.k", "this key is given twice (first on line 6)")},
		},
		{
			name:     "duplicate keys in JSON",
			manifest: `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "1", "k": "2"}}`,
			want:     ErrorList{invalid(0, 1, "data.k", "this key is given twice")},
		},
		{
			name:     "non-string keys and numbers JSON cannot hold",
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  ? [a, b]\n  : c\n  ratio: .nan\n  limit: -.inf\n",
			want: ErrorList{
				invalid(0, 6, "data", "a key must be a string, not a YAML sequence"),
				invalid(0, 8, "data.ratio", `".nan" cannot be sent to the API server: JSON has no infinity or NaN; quote it to make it a string`),
				invalid(0, 9, "data.limit", `"-.inf" cannot be sent to the API server: JSON has no infinity or NaN; quote it to make it a string`),
			},
		},
		{
			name:     "an alias inside its own anchor",
			manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\nloop: &loop\n  again: *loop\n",
			want:     ErrorList{invalid(0, 5, "loop.again", "anchor &loop contains an alias to itself")},
		},
		{
			name:     "a List without items",
			manifest: "apiVersion: v1\nkind: List\nitems: {}\n",
			want:     ErrorList{invalid(0, 3, "items", "a List must have an items list")},
		},
		{
			name: "errors in the items of a List count items as documents",
			manifest: `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: a
- apiVersion: v1
  kind: ConfigMap
- 7
---
apiVersion: v1
kind: ConfigMap
`,
			want: ErrorList{
				invalid(1, 8, "metadata.name", "required"),
				invalid(2, 10, "", "item is not an object but a number"),
				invalid(3, 12, "metadata.name", "required"),
			},
			wantObjects: []string{"a"},
		},
		{
			name:        "errors in the items of a JSON List",
			manifest:    "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n  {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"a\"}},\n  {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\"}\n]}",
			want:        ErrorList{invalid(1, 3, "metadata.name", "required")},
			wantObjects: []string{"a"},
		},
		{
			name:     "empty manifest",
			manifest: "",
			want:     ErrorList{invalid(-1, 0, "", "manifest holds no objects; an empty manifest is refused so that it can never prune every object")},
		},
		{
			name:     "white space only",
			manifest: " \n\t\n",
			want:     ErrorList{invalid(-1, 0, "", "manifest holds no objects; an empty manifest is refused so that it can never prune every object")},
		},
		{
			name:     "comments and separators only",
			manifest: "# nothing here\n---\n# nor here\n---\n...\n",
			want:     ErrorList{invalid(-1, 0, "", "manifest holds no objects; an empty manifest is refused so that it can never prune every object")},
		},
		{
			name:     "empty JSON array",
			manifest: "[]",
			want:     ErrorList{invalid(-1, 0, "", "manifest holds no objects; an empty manifest is refused so that it can never prune every object")},
		},
		{
			name:     "oversized manifest",
			manifest: "# " + strings.Repeat("x", MaxManifestBytes),
			want: ErrorList{{Index: -1, Reason: ReasonManifestTooLarge,
				Message: "manifest is 3145730 bytes, over the limit of 3145728 bytes (3 MiB)"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := Parse(tt.manifest)
			if diff := cmp.Diff(tt.want, errs, errorCmp); diff != "" {
				t.Errorf("Parse() errors (-want +got):\n%s", diff)
			}
			var names []string
			for _, o := range got {
				names = append(names, o.Object.GetName())
			}
			if diff := cmp.Diff(tt.wantObjects, names); diff != "" {
				t.Errorf("Parse() objects (-want +got):\n%s", diff)
			}
		})
	}
}

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

func TestParseStopsAfterTooManyErrors(t *testing.T) {
	_, errs := Parse(strings.Repeat("just a string\n---\n", 2*maxErrors))
	if len(errs) != maxErrors+1 {
		t.Fatalf("Parse() reported %d errors, want %d", len(errs), maxErrors+1)
	}
	if last := errs[0]; last.Index != -1 || !strings.Contains(last.Message, "stopped looking") {
		t.Errorf("first error = %v, want the one saying parsing stopped", last)
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

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

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

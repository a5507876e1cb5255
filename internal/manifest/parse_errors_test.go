// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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

func TestParseStopsAfterTooManyErrors(t *testing.T) {
	_, errs := Parse(strings.Repeat("just a string\n---\n", 2*maxErrors))
	if len(errs) != maxErrors+1 {
		t.Fatalf("Parse() reported %d errors, want %d", len(errs), maxErrors+1)
	}
	if last := errs[0]; last.Index != -1 || !strings.Contains(last.Message, "stopped looking") {
		t.Errorf("first error = %v, want the one saying parsing stopped", last)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse feeds Parse arbitrary manifests. Beyond not panicking, it checks
// what the rest of Vidra relies on: one parse allocates no more than
// maxParseAlloc, whatever the manifest (a manifest that costs much more
// takes the operator down), objects are complete and serializable,
// indexes and lines are sane, and the result does not vary between runs
// (a message that changed on every reconcile would rewrite status forever).
func FuzzParse(f *testing.F) {
	seeds := []string{
		olderSample,
		specSample,
		specSampleManifest,
		`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: &l {app: web}
spec:
  replicas: 2
  selector: {matchLabels: *l}
  template:
    metadata: {labels: *l}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports: [{containerPort: 80}]
`,
		crdManifest("Namespaced") + "---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: 3\n",
		`{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}, {"kind": "Secret"}]}`,
		`[{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}, 3, []]`,
		"--- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n...\n%YAML 1.1\n---\n",
		"a: &a [1, *a]\nb: {<<: [*a]}\n",
		"a: &a [x,x,x,x]\nb: &b [*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b]\nd: [*c,*c,*c,*c]\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    a: b\n   c: d\n",
		"{\n  \"apiVersion\": \"v1\",\n  \"kind\" \"ConfigMap\"\n}",
		"apiVersion: v1\r\nkind: List\r\nitems:\r\n- 1\r\n- {kind: X}\r\n",
		"\uFEFF# only a comment\n---\n...\n",
		"key: !!binary aGVsbG8=\nt: 2001-12-14\nn: .nan\nbig: 99999999999999999999\n? [a]\n: b\n",
		"",
	}
	for _, file := range []string{"app.yaml", "crd-and-cr.yaml", "list.json", "webhook.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, string(data))
	}
	for _, h := range hostileManifests() {
		seeds = append(seeds, h.manifest)
	}
	for _, s := range seeds {
		f.Add(s)
	}

	f.Fuzz(func(t *testing.T, manifest string) {
		objs, errs, alloc := parseAllocating(manifest)
		if alloc > maxParseAlloc {
			t.Fatalf("Parse() of %d bytes allocated %d bytes, over the budget of %d", len(manifest), alloc, maxParseAlloc)
		}
		lines := strings.Count(manifest, "\n") + 1

		last := -1
		for _, o := range objs {
			u := o.Object
			if u == nil {
				t.Fatalf("object %d is nil", o.Index)
			}
			if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
				t.Errorf("object %d lacks apiVersion, kind or name: %v", o.Index, u.Object)
			}
			if o.Index <= last {
				t.Errorf("object index %d after %d: indexes must grow", o.Index, last)
			}
			last = o.Index
			if o.Line < 1 || o.Line > lines {
				t.Errorf("object %d on line %d of a %d-line manifest", o.Index, o.Line, lines)
			}
			if _, err := json.Marshal(u.Object); err != nil {
				t.Errorf("object %d cannot be serialized: %v", o.Index, err)
			}
			checkJSONValue(t, u.Object)
		}
		for _, e := range errs {
			if e.Index < -1 || e.Line < 0 || e.Line > lines || e.Reason == "" || e.Message == "" {
				t.Errorf("malformed error %#v", e)
			}
		}
		if len(errs) == 0 {
			if len(objs) == 0 {
				t.Errorf("no objects and no error")
			}
			for i, o := range objs {
				if o.Index != i {
					t.Errorf("without errors, object %d has Index %d", i, o.Index)
				}
			}
		}

		objs2, errs2 := Parse(manifest)
		if diff := cmp.Diff(objs, objs2); diff != "" {
			t.Errorf("second Parse() objects differ (-first +second):\n%s", diff)
		}
		if diff := cmp.Diff(errs, errs2, errorCmp); diff != "" {
			t.Errorf("second Parse() errors differ (-first +second):\n%s", diff)
		}

		resolved, _ := Resolve(objs, "default", fakeScope)
		Sort(resolved)
	})
}

// checkJSONValue fails t unless v holds only the types an unstructured
// object may hold.
func checkJSONValue(t *testing.T, v any) {
	t.Helper()
	switch v := v.(type) {
	case nil, string, bool, int64, float64:
	case []any:
		for _, e := range v {
			checkJSONValue(t, e)
		}
	case map[string]any:
		for _, e := range v {
			checkJSONValue(t, e)
		}
	default:
		t.Errorf("value %v of type %T cannot be held by an unstructured object", v, v)
	}
}

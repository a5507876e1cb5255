// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

const schemaTestDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo}
spec:
  replicas: "3"
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: 1.27
        ports: [{containerPort: 80}, {containerPort: 80}]
        env: {name: A, value: b}
      hostNetwork: "true"
`

func schemaTestPlanned(t *testing.T, group string) *planned {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(schemaTestDeployment), &u.Object); err != nil {
		t.Fatal(err)
	}
	return &planned{obj: u, key: keyOf(u), gvr: schema.GroupVersionResource{Group: group, Version: "v1", Resource: "deployments"}, index: 1, line: 12}
}

// refusal is the API server's answer to such an apply: an internal error.
func refusal(problems string) error {
	return apierrors.NewInternalError(errors.New("failed to create typed patch object (demo/web; apps/v1, Kind=Deployment): " + problems))
}

func TestSchemaRefusalSaysWhatToFix(t *testing.T) {
	tests := []struct {
		name     string
		problems string
		want     []string
	}{{
		name:     "an unknown field",
		problems: ".spec.replica: field not declared in schema",
		want:     []string{"apps/v1 Deployment has no field .spec.replica: check its spelling and indentation (the object starts at line 12)"},
	}, {
		name: "several, unknown fields first",
		problems: "errors:\n  .spec.template.spec.containers: duplicate entries for key [name=\"web\"]\n" +
			"  .spec.template.spec.containers[name=\"web\"].port: field not declared in schema\n  .spec.replica: field not declared in schema",
		want: []string{`apps/v1 Deployment has no fields .spec.template.spec.containers[name="web"].port, .spec.replica: check their spelling and indentation; ` +
			`.spec.template.spec.containers has more than one entry with name="web": each entry needs its own (the object starts at line 12)`},
	}, {
		name:     "a quoted number",
		problems: ".spec.replicas: expected numeric (int or float), got string",
		want:     []string{`.spec.replicas must be a number, not the string "3": write it without quotes`},
	}, {
		name:     "a quoted boolean",
		problems: ".spec.template.spec.hostNetwork: expected boolean, got &value.valueUnstructured{Value:\"true\"}",
		want:     []string{`.spec.template.spec.hostNetwork must be true or false, not the string "true": write it without quotes`},
	}, {
		name:     "a bare value that must be a string, in a keyed list",
		problems: `.spec.template.spec.containers[name="web"].image: expected string, got &value.valueUnstructured{Value:1.27}`,
		want:     []string{`.spec.template.spec.containers[name="web"].image must be a string, not the number 1.27: put it in quotes`},
	}, {
		name:     "an object where a list goes",
		problems: `.spec.template.spec.containers[name="web"].env: expected list, got &{map[name:A value:b]}`,
		want:     []string{`.spec.template.spec.containers[name="web"].env must be a list, not an object: start each entry with "- "`},
	}, {
		name:     "a duplicate key the manifest half defaults",
		problems: `.spec.template.spec.containers[name="web"].ports: duplicate entries for key [containerPort=80,protocol="TCP"]`,
		want:     []string{`.spec.template.spec.containers[name="web"].ports has more than one entry with containerPort=80,protocol="TCP"`},
	}, {
		name:     "a path that cannot be followed keeps the server's words",
		problems: `.spec.nothing[name="x"].y: expected string, got &value.valueUnstructured{Value:1}`,
		want:     []string{`.spec.nothing[name="x"].y must be a string: expected string, got &value.valueUnstructured{Value:1}`},
	}, {
		name:     "a problem it does not know is kept whole",
		problems: `.spec.template: element 0: associative list with keys has an element that omits all key fields ["name"]`,
		want:     []string{`.spec.template: element 0: associative list with keys has an element that omits all key fields ["name"] (the object starts at line 12)`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := schemaTestPlanned(t, "apps")
			apiErr := refusal(tt.problems)
			oe := classify(p, apiErr)
			if oe.Reason != v1alpha1.ReasonInvalidManifest || oe.Retry {
				t.Errorf("reason %s, retry %v; want %s, no retry", oe.Reason, oe.Retry, v1alpha1.ReasonInvalidManifest)
			}
			msg := oe.Error()
			if !strings.HasPrefix(msg, "Deployment demo/web (document 2): ") {
				t.Errorf("message %q does not start with the object and its document", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message\n  %q\nlacks\n  %q", msg, w)
				}
			}
			if strings.Contains(msg, typedPatchRefusal) {
				t.Errorf("message %q keeps the server's heading", msg)
			}
			if !errors.Is(oe, apiErr) {
				t.Error("the rewritten error does not unwrap to the API server's")
			}
		})
	}
}

// A value quoted in a message is cut to 40 bytes between characters: cut
// inside one, the quote showed its bytes as \xc3.
func TestDescribeCutsAStringBetweenCharacters(t *testing.T) {
	got := describe(strings.Repeat("é", 30))
	if want := `the string "` + strings.Repeat("é", 18) + `..."`; got != want {
		t.Errorf("describe = %q, want %q", got, want)
	}
}

func TestSchemaRefusalOfACustomResourceIsRetried(t *testing.T) {
	// Its CustomResourceDefinition may be changing in the same pass.
	oe := classify(schemaTestPlanned(t, "widgets.example.com"), refusal(".spec.replica: field not declared in schema"))
	if oe.Reason != v1alpha1.ReasonInvalidManifest || !oe.Retry {
		t.Errorf("reason %s, retry %v; want %s, retried", oe.Reason, oe.Retry, v1alpha1.ReasonInvalidManifest)
	}
}

func TestOtherInternalErrorsAreRetriedAsBefore(t *testing.T) {
	for _, err := range []error{
		apierrors.NewInternalError(errors.New("etcdserver: request timed out")),
		// The live object does not fit: the schema changed under it, no
		// fault of the manifest.
		apierrors.NewInternalError(errors.New("failed to create typed live object (demo/web; apps/v1, Kind=Deployment): .spec.x: field not declared in schema")),
	} {
		oe := classify(schemaTestPlanned(t, "apps"), err)
		if oe.Reason != v1alpha1.ReasonApplyFailed || !oe.Retry || oe.Err != err {
			t.Errorf("%v: reason %s, retry %v, err %v; want %s, retried, unchanged", err, oe.Reason, oe.Retry, oe.Err, v1alpha1.ReasonApplyFailed)
		}
	}
}

func TestLookupPath(t *testing.T) {
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(`{a: {l: [{k: x, n: 1, v: 10}, {k: "y,]", n: 2, v: 20}], s: [p, q], i: [5, 6]}}`), &obj); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]any{
		".a.i[1]":                      int64(6),
		`.a.l[k="x"].v`:                int64(10),
		`.a.l[k="y,]",n=2].v`:          int64(20),
		`.a.l[k="y,]",protocol="T"].v`: int64(20), // a key the entry leaves out is defaulted
		`.a.s[="q"]`:                   "q",
	} {
		got, ok := lookupPath(obj, path)
		if !ok || !sameScalar(got, want) {
			t.Errorf("lookupPath(%s) = %v, %v; want %v", path, got, ok, want)
		}
	}
	for _, path := range []string{".b", ".a.i[2]", ".a.i[-1]", `.a.l[k="z"].v`, `.a.l[k="x"`, ".a.l.v", "a", `.a.s[={}]`} {
		if got, ok := lookupPath(obj, path); ok {
			t.Errorf("lookupPath(%s) = %v, want not found", path, got)
		}
	}
}

// FuzzSchemaRefusal feeds refusals with any text after the heading: the
// paths in them name fields a tenant chose. Nothing may panic, and the
// result always unwraps to the API server's error.
func FuzzSchemaRefusal(f *testing.F) {
	for _, s := range []string{
		`.spec.replica: field not declared in schema`,
		"errors:\n  .a[name=\"x\"].b: expected string, got &value.valueUnstructured{Value:1}\n  .c: field not declared in schema",
		`.spec.template.spec.containers[name="a\"]"].ports: duplicate entries for key [containerPort=80,protocol="TCP"]`,
		`.a[=`, `.[`, `.a[]`, `.a[-1]: expected list, got x`, `: x`, `.a[k=]: expected map, got nil`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, problems string) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(schemaTestDeployment), &obj.Object); err != nil {
			t.Fatal(err)
		}
		apiErr := refusal(problems)
		got, ok := SchemaRefusal(obj, 3, apiErr)
		if !ok || !errors.Is(got, apiErr) {
			t.Fatalf("SchemaRefusal(%q) = %v, %v", problems, got, ok)
		}
	})
}

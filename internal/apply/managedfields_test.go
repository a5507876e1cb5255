// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// fieldsEntry is a managedFields entry of manager; an Apply when manager is
// "vidra", an Update otherwise, as the API server records them.
func fieldsEntry(manager, fields string) metav1.ManagedFieldsEntry {
	op := metav1.ManagedFieldsOperationUpdate
	if manager == "vidra" {
		op = metav1.ManagedFieldsOperationApply
	}
	e := metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", FieldsType: "FieldsV1"}
	if fields != "" {
		e.FieldsV1 = &metav1.FieldsV1{Raw: []byte(fields)}
	}
	return e
}

// object decodes a desired object the way the manifest parser does, with
// integers as int64.
func object(t *testing.T, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var obj map[string]any
	if err := d.Decode(&obj); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return numbers(obj).(map[string]any)
}

func numbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = numbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = numbers(e)
		}
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	}
	return v
}

func TestParseHandEditsManagers(t *testing.T) {
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    []string
	}{
		{"no entries", nil, nil},
		{"only vidra", []metav1.ManagedFieldsEntry{fieldsEntry("vidra", `{"f:data":{}}`)}, nil},
		{"in order of first appearance, once each", []metav1.ManagedFieldsEntry{
			fieldsEntry("kubectl-label", `{"f:metadata":{"f:labels":{"f:a":{}}}}`),
			fieldsEntry("vidra", `{"f:data":{}}`),
			fieldsEntry("kubectl-edit", `{"f:data":{"f:b":{}}}`),
			{Manager: "kubectl-label", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}},
		}, []string{"kubectl-label", "kubectl-edit"}},
		{"an entry without fields still names its manager", []metav1.ManagedFieldsEntry{fieldsEntry("kubectl-edit", "")}, []string{"kubectl-edit"}},
		{"an unparseable entry still names its manager", []metav1.ManagedFieldsEntry{fieldsEntry("kubectl-edit", `{"f:data":`)}, []string{"kubectl-edit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseHandEdits(tt.entries, []string{"kubectl-edit", "kubectl-label"}, nil).managers()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("managers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHandEditsCoveredBy(t *testing.T) {
	deployment := `{
		"metadata": {"name": "web", "labels": {"app": "web"}, "finalizers": ["example.com/keep"]},
		"spec": {
			"replicas": 2,
			"paused": null,
			"template": {
				"metadata": {"labels": {"app": "web"}},
				"spec": {"containers": [
					{"name": "web", "image": "nginx", "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 81}]},
					{"name": "twin", "image": "a"}, {"name": "twin", "image": "b"}
				]}
			}
		}
	}`
	tests := []struct {
		name    string
		desired string // deployment when empty
		edits   []string
		want    bool
	}{
		// The cases of handEditsCovered.
		{"kubectl scale of replicas the manifest sets", "", []string{`{"f:spec":{"f:replicas":{}}}`}, true},
		{"a label the manifest sets", "", []string{`{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`}, true},
		{"a label the manifest does not set", "", []string{`{"f:metadata":{"f:labels":{"f:hand":{}}}}`}, false},
		{"a list element of an empty list", `{"spec":{"template":{"spec":{"containers":[]}}}}`,
			[]string{`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{}}}}}}`}, false},
		{"a field under a scalar", "", []string{`{"f:spec":{"f:replicas":{"f:x":{}}}}`}, false},

		{"no hand edit", "", nil, true},
		{"a hand edit without fields", "", []string{""}, true},
		{"unparseable fields", "", []string{`{"f:spec":{"f:replicas":{}}`}, false},
		{"unparseable fields beside covered ones", "", []string{`{"f:spec":{"f:replicas":{}}}`, `not json`}, false},
		{"two managers, both covered", "", []string{`{"f:spec":{"f:replicas":{}}}`, `{"f:metadata":{"f:labels":{"f:app":{}}}}`}, true},
		{"two managers, one not covered", "", []string{`{"f:spec":{"f:replicas":{}}}`, `{"f:metadata":{"f:labels":{"f:hand":{}}}}`}, false},
		{"a nested map field the manifest sets", "", []string{`{"f:spec":{"f:template":{"f:metadata":{"f:labels":{"f:app":{}}}}}}`}, true},
		{"a nested map field the manifest does not set", "", []string{`{"f:spec":{"f:template":{"f:metadata":{"f:labels":{"f:tier":{}}}}}}`}, false},
		{"a nested map the manifest does not set", "", []string{`{"f:spec":{"f:strategy":{"f:type":{}}}}`}, false},
		{"a map owned with its fields", "", []string{`{"f:spec":{".":{},"f:template":{".":{},"f:metadata":{".":{}}}}}`}, true},
		{"an annotations map the manifest does not set", "", []string{`{"f:metadata":{"f:annotations":{".":{},"f:x":{}}}}`}, false},
		{"a field the manifest sets to null", "", []string{`{"f:spec":{"f:paused":{}}}`}, false},
		{"a list element the manifest sets, by key", "",
			[]string{`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:name":{},"f:image":{}}}}}}}`}, true},
		{"a field of a list element the manifest does not set", "",
			[]string{`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:resources":{}}}}}}}`}, false},
		{"a list element the manifest does not have", "",
			[]string{`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"sidecar\"}":{}}}}}}`}, false},
		{"a list element the manifest has twice", "",
			[]string{`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"twin\"}":{"f:image":{}}}}}}}`}, false},
		{"a list element matched by a numeric compound key", "",
			[]string{`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}}}}}}}`}, true},
		{"a key field the server defaulted", "",
			[]string{`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:ports":{"k:{\"containerPort\":81,\"protocol\":\"TCP\"}":{}}}}}}}}`}, false},
		{"a set-list value the manifest sets", "", []string{`{"f:metadata":{"f:finalizers":{".":{},"v:\"example.com/keep\"":{}}}}`}, true},
		{"a set-list value the manifest does not set", "", []string{`{"f:metadata":{"f:finalizers":{"v:\"example.com/hand\"":{}}}}`}, false},
		{"an index into an atomic list", "", []string{`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"i:0":{}}}}}}`}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired := tt.desired
			if desired == "" {
				desired = deployment
			}
			entries := []metav1.ManagedFieldsEntry{fieldsEntry("vidra", `{"f:spec":{"f:paused":{}}}`)}
			for i, f := range tt.edits {
				entries = append(entries, fieldsEntry([]string{"kubectl-edit", "kubectl-scale"}[i%2], f))
			}
			h := parseHandEdits(entries, []string{"kubectl-edit", "kubectl-scale"}, nil)
			if got := h.coveredBy(object(t, desired)); got != tt.want {
				t.Errorf("coveredBy(%s) = %v, want %v", tt.edits, got, tt.want)
			}
		})
	}
}

func TestHandEditsAddedMetadataKeys(t *testing.T) {
	desired := `{
		"metadata": {"name": "web", "labels": {"app": "web"}},
		"data": {"a": "1"},
		"spec": {"ports": [{"name": "http", "port": 80}]}
	}`
	tests := []struct {
		name    string
		desired string // desired when empty
		edits   []string
		want    [][]string
		ok      bool
	}{
		// The cases of handAddedKeys.
		{"a label added by hand", "", []string{`{"f:metadata":{"f:labels":{".":{},"f:hand":{}}}}`}, [][]string{{"metadata", "labels", "hand"}}, true},
		{"an annotation with a slash", "", []string{`{"f:metadata":{"f:annotations":{"f:example.com/x":{}}}}`}, [][]string{{"metadata", "annotations", "example.com/x"}}, true},
		{"a label the manifest sets", "", []string{`{"f:metadata":{"f:labels":{"f:app":{}}}}`}, nil, false},
		{"a data key added by hand", "", []string{`{"f:data":{"f:b":{}}}`}, nil, false},
		{"a list element", "", []string{`{"f:spec":{"f:ports":{"k:{\"port\":80}":{}}}}`}, nil, false},

		{"no hand edit", "", nil, nil, false},
		{"unparseable fields", "", []string{`{"f:metadata":{"f:labels":{"f:hand":{}}}`}, nil, false},
		{"label keys with a slash and a tilde, kept as they are", "",
			[]string{`{"f:metadata":{"f:labels":{"f:example.com/team":{},"f:a~b":{}}}}`},
			[][]string{{"metadata", "labels", "a~b"}, {"metadata", "labels", "example.com/team"}}, true},
		{"keys added by two managers", "",
			[]string{`{"f:metadata":{"f:labels":{"f:hand":{}}}}`, `{"f:metadata":{"f:annotations":{".":{},"f:note":{}}}}`},
			[][]string{{"metadata", "annotations", "note"}, {"metadata", "labels", "hand"}}, true},
		{"a label beside a data key", "", []string{`{"f:metadata":{"f:labels":{"f:hand":{}}},"f:data":{"f:b":{}}}`}, nil, false},
		{"a label beside a field of a list element", "",
			[]string{`{"f:metadata":{"f:labels":{"f:hand":{}}},"f:spec":{"f:ports":{"k:{\"port\":80}":{"f:nodePort":{}}}}}`}, nil, false},
		{"a label beside a list element the manifest sets", "",
			[]string{`{"f:metadata":{"f:labels":{"f:hand":{}}},"f:spec":{"f:ports":{"k:{\"port\":80}":{".":{},"f:name":{}}}}}`},
			[][]string{{"metadata", "labels", "hand"}}, true},
		{"the labels map created by hand with its key", `{"metadata":{"name":"web"}}`,
			[]string{`{"f:metadata":{"f:labels":{".":{},"f:hand":{}}}}`}, [][]string{{"metadata", "labels", "hand"}}, true},
		{"a nested label under a map the manifest does not set", "",
			[]string{`{"f:spec":{"f:template":{"f:metadata":{"f:labels":{"f:hand":{}}}}}}`}, nil, false},
		{"the whole labels map", `{"metadata":{"name":"web"}}`, []string{`{"f:metadata":{"f:labels":{}}}`}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.desired
			if d == "" {
				d = desired
			}
			var entries []metav1.ManagedFieldsEntry
			for i, f := range tt.edits {
				entries = append(entries, fieldsEntry([]string{"kubectl-label", "kubectl-annotate"}[i%2], f))
			}
			h := parseHandEdits(entries, []string{"kubectl-label", "kubectl-annotate"}, nil)
			got, ok := h.addedMetadataKeys(object(t, d))
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v (%v)", ok, tt.ok, got)
			}
			if diff := cmp.Diff(tt.want, got); ok && diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
		})
	}
}

// takenOverCase is one row of TestManagedFieldsTakenOver.
type takenOverCase struct {
	name    string
	entries []metav1.ManagedFieldsEntry
	ok      bool
	// managers lists the managers of the result in order, "+vidra" for
	// an Apply entry of Vidra's that was created.
	managers []string
	fields   string // the field set of Vidra's main Apply entry
}

// takenOverCases are the entries TestManagedFieldsTakenOver hands over,
// kubectl-edit and kubectl-label being the hand-edit managers.
func takenOverCases() []takenOverCase {
	status := metav1.ManagedFieldsEntry{
		Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Subresource: "status", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)},
	}
	vidraStatus := metav1.ManagedFieldsEntry{
		Manager: "vidra", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1",
		Subresource: "status", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:ready":{}}}`)},
	}
	vidraUpdate := fieldsEntry("vidra", `{"f:data":{"f:u":{}}}`)
	vidraUpdate.Operation = metav1.ManagedFieldsOperationUpdate
	return []takenOverCase{
		{"the fields of two hand-edit managers join Vidra's entry", []metav1.ManagedFieldsEntry{
			fieldsEntry("vidra", `{"f:data":{"f:a":{}}}`),
			fieldsEntry("kubectl-edit", `{"f:data":{"f:b":{}}}`),
			status,
			fieldsEntry("kubectl-label", `{"f:metadata":{"f:labels":{"f:x":{}}}}`),
		}, true, []string{"vidra", "kube-controller-manager"},
			`{"f:data":{"f:a":{},"f:b":{}},"f:metadata":{"f:labels":{"f:x":{}}}}`},
		{"no hand edit", []metav1.ManagedFieldsEntry{fieldsEntry("vidra", `{"f:data":{"f:a":{}}}`), status}, false, nil, ""},
		{"Vidra's entry missing is created", []metav1.ManagedFieldsEntry{
			fieldsEntry("kubectl-edit", `{"f:data":{"f:b":{}}}`),
		}, true, []string{"+vidra"}, `{"f:data":{"f:b":{}}}`},
		{"Vidra's entry keeps its place", []metav1.ManagedFieldsEntry{
			status,
			fieldsEntry("kubectl-edit", `{"f:data":{"f:b":{}}}`),
			fieldsEntry("vidra", `{"f:data":{"f:a":{}}}`),
		}, true, []string{"kube-controller-manager", "vidra"}, `{"f:data":{"f:a":{},"f:b":{}}}`},
		{"Vidra's status entry is not its main entry", []metav1.ManagedFieldsEntry{
			vidraStatus,
			fieldsEntry("kubectl-edit", `{"f:data":{"f:b":{}}}`),
		}, true, []string{"vidra", "+vidra"}, `{"f:data":{"f:b":{}}}`},
		{"Vidra's Update entry is not its Apply entry", []metav1.ManagedFieldsEntry{
			vidraUpdate,
			fieldsEntry("kubectl-edit", `{"f:data":{"f:b":{}}}`),
		}, true, []string{"vidra", "+vidra"}, `{"f:data":{"f:b":{}}}`},
		{"an unparseable hand edit is dropped", []metav1.ManagedFieldsEntry{
			fieldsEntry("vidra", `{"f:data":{"f:a":{}}}`),
			fieldsEntry("kubectl-edit", `{"f:data":`),
			fieldsEntry("kubectl-label", `{"f:metadata":{"f:labels":{"f:x":{}}}}`),
		}, true, []string{"vidra"}, `{"f:data":{"f:a":{}},"f:metadata":{"f:labels":{"f:x":{}}}}`},
		{"a hand edit without fields is dropped", []metav1.ManagedFieldsEntry{
			fieldsEntry("vidra", `{"f:data":{"f:a":{}}}`),
			fieldsEntry("kubectl-edit", ""),
		}, true, []string{"vidra"}, `{"f:data":{"f:a":{}}}`},
		{"an unparseable entry of Vidra's is replaced", []metav1.ManagedFieldsEntry{
			fieldsEntry("vidra", `{"f:data"`),
			fieldsEntry("kubectl-edit", `{"f:data":{"f:b":{}}}`),
		}, true, []string{"vidra"}, `{"f:data":{"f:b":{}}}`},
		{"maps owned with their fields keep their marker", []metav1.ManagedFieldsEntry{
			fieldsEntry("vidra", `{"f:metadata":{"f:labels":{"f:app":{}}}}`),
			fieldsEntry("kubectl-label", `{"f:metadata":{"f:labels":{".":{},"f:x":{}}}}`),
			fieldsEntry("kubectl-edit", `{"f:spec":{"f:ports":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:port":{}}}}}`),
		}, true, []string{"vidra"},
			`{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:x":{}}},"f:spec":{"f:ports":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:port":{}}}}}`},
	}
}

// resultManagers lists the managers of got in order, "+vidra" for an
// Apply entry of Vidra's that entries did not have, and the index of
// Vidra's main Apply entry.
func resultManagers(entries, got []metav1.ManagedFieldsEntry) (managers []string, main int) {
	main = -1
	for i, e := range got {
		name := e.Manager
		if e.Manager == "vidra" && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			main = i
			if !slices.ContainsFunc(entries, func(o metav1.ManagedFieldsEntry) bool {
				return o.Manager == "vidra" && o.Subresource == "" && o.Operation == e.Operation
			}) {
				name = "+vidra"
			}
		}
		managers = append(managers, name)
	}
	return managers, main
}

func TestManagedFieldsTakenOver(t *testing.T) {
	overrides := []string{"kubectl-edit", "kubectl-label"}
	now := metav1.Now()
	for _, tt := range takenOverCases() {
		t.Run(tt.name, func(t *testing.T) {
			before := make([]metav1.ManagedFieldsEntry, len(tt.entries))
			for i, e := range tt.entries {
				e.DeepCopyInto(&before[i])
			}
			got, ok := managedFieldsTakenOver(tt.entries, overrides, nil, "vidra", "v1", now)
			if diff := cmp.Diff(before, tt.entries); diff != "" {
				t.Fatalf("entries changed in place (-before +after):\n%s", diff)
			}
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				if diff := cmp.Diff(tt.entries, got); diff != "" {
					t.Errorf("entries changed with nothing taken over (-want +got):\n%s", diff)
				}
				return
			}
			managers, main := resultManagers(tt.entries, got)
			if diff := cmp.Diff(tt.managers, managers); diff != "" {
				t.Fatalf("managers (-want +got):\n%s", diff)
			}
			if got[main].FieldsType != "FieldsV1" || got[main].APIVersion != "v1" || got[main].Time == nil {
				t.Errorf("Vidra's entry = %+v", got[main])
			}
			if diff := cmp.Diff(canonical(t, tt.fields), string(got[main].FieldsV1.Raw)); diff != "" {
				t.Errorf("Vidra's field set (-want +got):\n%s", diff)
			}
			// The result is written back whole: it must be managedFields the
			// API server accepts.
			if err := managedfields.ValidateManagedFields(got); err != nil {
				t.Errorf("managedFields the API server would reject: %v", err)
			}
		})
	}
}

// canonical returns fields as the fieldpath serializer writes them, sorted,
// after checking that they read back as written.
func canonical(t *testing.T, fields string) string {
	t.Helper()
	set := &fieldpath.Set{}
	if err := set.FromJSON(bytes.NewReader([]byte(fields))); err != nil {
		t.Fatalf("parse %s: %v", fields, err)
	}
	raw, err := set.ToJSON()
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal([]byte(fields), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("%s does not read back as written (-written +read):\n%s", fields, diff)
	}
	return string(raw)
}

// benchmarkEntries are the managedFields of a Deployment after a sync of
// Vidra's, the controller's status writes and two hand edits.
var benchmarkEntries = []metav1.ManagedFieldsEntry{
	fieldsEntry("vidra", `{"f:metadata":{"f:labels":{"f:app":{},"f:vidra.io/owner":{}}},"f:spec":{"f:replicas":{},"f:selector":{},"f:template":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},"f:resources":{"f:limits":{"f:memory":{}}}}}}}}}`),
	{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1", Subresource: "status", FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{".":{},"f:deployment.kubernetes.io/revision":{}}},"f:status":{"f:availableReplicas":{},"f:conditions":{".":{},"k:{\"type\":\"Available\"}":{".":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:observedGeneration":{},"f:readyReplicas":{},"f:replicas":{},"f:updatedReplicas":{}}}`)}},
	fieldsEntry("kubectl-edit", `{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:image":{}}}}}}}`),
	fieldsEntry("kubectl-label", `{"f:metadata":{"f:labels":{"f:hand":{}}}}`),
}

func BenchmarkParseHandEditsCoveredBy(b *testing.B) {
	desired := map[string]any{
		"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web", "vidra.io/owner": "x"}},
		"spec": map[string]any{"replicas": int64(2), "selector": map[string]any{}, "template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
			"spec": map[string]any{"containers": []any{map[string]any{
				"name": "web", "image": "nginx", "ports": []any{map[string]any{"containerPort": int64(80), "protocol": "TCP"}},
				"resources": map[string]any{"limits": map[string]any{"memory": "64Mi"}},
			}}},
		}},
	}
	// The caller reads managedFields from the live object once, decoding them
	// from its map: part of the cost.
	live := &unstructured.Unstructured{Object: map[string]any{}}
	live.SetManagedFields(benchmarkEntries)
	overrides := []string{"kubectl-edit", "kubectl-label"}
	for b.Loop() {
		h := parseHandEdits(live.GetManagedFields(), overrides, nil)
		if len(h.managers()) > 0 && !h.coveredBy(desired) {
			h.addedMetadataKeys(desired)
		}
	}
}

package controller

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestIsSubset(t *testing.T) {
	tests := []struct {
		name          string
		desired, live string
		want          bool
	}{
		{"equal", `{"a":1}`, `{"a":1}`, true},
		{"live has more", `{"a":1}`, `{"a":1,"b":2}`, true},
		{"value differs", `{"a":1}`, `{"a":2}`, false},
		{"missing in live", `{"a":1}`, `{}`, false},
		{"nested defaults ignored", `{"spec":{"ports":[{"port":80}]}}`, `{"spec":{"ports":[{"port":80,"protocol":"TCP"}]}}`, true},
		{"list length differs", `{"l":[1,2]}`, `{"l":[1]}`, false},
		{"list order matters", `{"l":[1,2]}`, `{"l":[2,1]}`, false},
		{"null wants absence", `{"a":null}`, `{}`, true},
		{"null but present", `{"a":null}`, `{"a":1}`, false},
		{"int and float are numbers", `{"a":1}`, `{"a":1.0}`, true},
		{"type differs", `{"a":"1"}`, `{"a":1}`, false},
		{"map vs scalar", `{"a":{"b":1}}`, `{"a":"x"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d, l any
			if err := json.Unmarshal([]byte(tt.desired), &d); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.live), &l); err != nil {
				t.Fatal(err)
			}
			if got := isSubset(d, l); got != tt.want {
				t.Errorf("isSubset(%s, %s) = %v, want %v", tt.desired, tt.live, got, tt.want)
			}
		})
	}
}

func TestTakeOverManagedFields(t *testing.T) {
	fields := func(s string) *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(s)} }
	now := metav1.Now()
	entries := []metav1.ManagedFieldsEntry{
		{Manager: "vidra", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: fields(`{"f:data":{"f:a":{}}}`)},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields(`{"f:data":{"f:b":{}}}`)},
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: fields(`{"f:status":{}}`)},
		{Manager: "kubectl-label", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: fields(`{"f:metadata":{"f:labels":{"f:x":{}}}}`)},
	}
	got, ok := takeOverManagedFields(entries, []string{"kubectl-edit", "kubectl-label"}, "vidra", "v1", now)
	if !ok {
		t.Fatal("nothing taken over")
	}
	if len(got) != 2 || got[0].Manager != "vidra" || got[1].Manager != "kube-controller-manager" {
		t.Fatalf("entries = %+v", got)
	}
	var set map[string]any
	if err := json.Unmarshal(got[0].FieldsV1.Raw, &set); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"f:data":     map[string]any{"f:a": map[string]any{}, "f:b": map[string]any{}},
		"f:metadata": map[string]any{"f:labels": map[string]any{"f:x": map[string]any{}}},
	}
	if diff := cmp.Diff(want, set); diff != "" {
		t.Errorf("vidra's field set (-want +got):\n%s", diff)
	}
	if _, ok := takeOverManagedFields(entries[:1], []string{"kubectl-edit"}, "vidra", "v1", now); ok {
		t.Error("took over with no hand edit")
	}
	// No Apply entry of Vidra yet: one is created.
	got, _ = takeOverManagedFields(entries[1:2], []string{"kubectl-edit"}, "vidra", "v1", now)
	if len(got) != 1 || got[0].Manager != "vidra" || got[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("entries = %+v", got)
	}
}

func TestHandEditsCovered(t *testing.T) {
	desired := map[string]any{
		"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web"}},
		"spec":     map[string]any{"replicas": int64(2), "template": map[string]any{"spec": map[string]any{"containers": []any{}}}},
	}
	tests := []struct {
		name   string
		fields string
		want   bool
	}{
		{"kubectl scale of replicas the manifest sets", `{"f:spec":{"f:replicas":{}}}`, true},
		{"a label the manifest sets", `{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`, true},
		{"a label the manifest does not set", `{"f:metadata":{"f:labels":{"f:hand":{}}}}`, false},
		{"a list element", `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{}}}}}}`, false},
		{"a field under a scalar", `{"f:spec":{"f:replicas":{"f:x":{}}}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := &unstructured.Unstructured{Object: map[string]any{}}
			live.SetManagedFields([]metav1.ManagedFieldsEntry{
				{Manager: "vidra", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:paused":{}}}`)}},
				{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(tt.fields)}},
			})
			if got := handEditsCovered(live, []string{"kubectl-edit"}, desired); got != tt.want {
				t.Errorf("handEditsCovered(%s) = %v, want %v", tt.fields, got, tt.want)
			}
		})
	}
}

func TestHandAddedKeys(t *testing.T) {
	desired := map[string]any{
		"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web"}},
		"data":     map[string]any{"a": "1"},
	}
	tests := []struct {
		name   string
		fields string
		want   [][]string
		ok     bool
	}{
		{"a label added by hand", `{"f:metadata":{"f:labels":{".":{},"f:hand":{}}}}`, [][]string{{"metadata", "labels", "hand"}}, true},
		{"an annotation with a slash", `{"f:metadata":{"f:annotations":{"f:example.com/x":{}}}}`, [][]string{{"metadata", "annotations", "example.com/x"}}, true},
		{"a label the manifest sets", `{"f:metadata":{"f:labels":{"f:app":{}}}}`, nil, false},
		{"a data key added by hand", `{"f:data":{"f:b":{}}}`, nil, false},
		{"a list element", `{"f:spec":{"f:ports":{"k:{\"port\":80}":{}}}}`, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := &unstructured.Unstructured{Object: map[string]any{}}
			live.SetManagedFields([]metav1.ManagedFieldsEntry{
				{Manager: "kubectl-label", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(tt.fields)}},
			})
			got, ok := handAddedKeys(live, []string{"kubectl-label"}, desired)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v (%v)", ok, tt.ok, got)
			}
			if diff := cmp.Diff(tt.want, got); ok && diff != "" {
				t.Errorf("paths (-want +got):\n%s", diff)
			}
		})
	}
}

package controller

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

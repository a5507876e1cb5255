// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func configMap(data map[string]any, entries ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"namespace": "shop", "name": "web"},
		"data": data,
	}}
	if entries == nil {
		return u
	}
	u.SetManagedFields(entries)
	// The zero time as an API server's answer holds it: SetManagedFields
	// would leave it out.
	mf := u.Object["metadata"].(map[string]any)["managedFields"].([]any)
	for i, e := range entries {
		if e.Time != nil && e.Time.IsZero() {
			mf[i].(map[string]any)["time"] = "0001-01-01T00:00:00Z"
		}
	}
	return u
}

// A managedFields entry may carry the zero time, as a remote destination's
// server may write it: a record of that time would be a status of
// "time": null, which the API server refuses, every status write with it.
// The time is then when Vidra saw the change.
func TestDriftOfAChangeAtTheZeroTimeIsWhenSeen(t *testing.T) {
	zero := &metav1.Time{}
	earlier := &metav1.Time{Time: time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)}
	now := time.Date(2025, 1, 1, 10, 0, 0, 500, time.UTC)
	edit := func(manager string, at *metav1.Time, fields string) metav1.ManagedFieldsEntry {
		e := fieldsEntry(manager, fields)
		e.Time = at
		return e
	}
	tests := []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		manager string
		time    time.Time
	}{
		{"the owner of the field, at the zero time", []metav1.ManagedFieldsEntry{edit("kubectl-edit", zero, `{"f:data":{"f:a":{}}}`)},
			"kubectl-edit", now.Truncate(time.Second)},
		{"the owner of the field, at no time", []metav1.ManagedFieldsEntry{edit("kubectl-edit", nil, `{"f:data":{"f:a":{}}}`)},
			"kubectl-edit", now.Truncate(time.Second)},
		{"the only writer, at the zero time", []metav1.ManagedFieldsEntry{edit("helm", zero, "")},
			"", now.Truncate(time.Second)},
		{"the last writer, after one at the zero time", []metav1.ManagedFieldsEntry{edit("helm", zero, ""), edit("kubectl", earlier, "")},
			"kubectl", earlier.Time},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &planned{obj: configMap(map[string]any{"a": "1"})}
			r := driftOf(p, configMap(map[string]any{"a": "2"}, tt.entries...), handEdits{fields: &fieldpath.Set{}}, now)
			if r.Manager != tt.manager || !r.Time.Time.Equal(tt.time) {
				t.Errorf("changed by %q at %v, want %q at %v", r.Manager, r.Time, tt.manager, tt.time)
			}
			b, err := json.Marshal(r)
			if err != nil || strings.Contains(string(b), `"time":null`) {
				t.Errorf("record as the status holds it: %s (%v)", b, err)
			}
		})
	}
}

// Objects of one kind and name in two API groups are listed in the same
// order at every reconcile: in the map's order, the status would be
// written again each time.
func TestDriftListOrdersAPIVersionsToo(t *testing.T) {
	records := []v1alpha1.DriftRecord{
		{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway", Namespace: "shop", Name: "web", Fields: []string{"/spec/a"}},
		{APIVersion: "networking.istio.io/v1", Kind: "Gateway", Namespace: "shop", Name: "web", Fields: []string{"/spec/b"}},
	}
	for range 64 {
		st := &resourceState{}
		for _, r := range records {
			st.report(recordKey(r), r)
		}
		if diff := cmp.Diff(records, st.driftList(func(ObjectKey) bool { return true })); diff != "" {
			t.Fatalf("drift list (-want +got):\n%s", diff)
		}
	}
}

// A key is anyone's to choose, and a drift record's pointers go into
// conditions and Events: a newline would break the message, an escape
// reach a terminal, a bidirectional override turn the text around.
func TestDriftPointersAreReadable(t *testing.T) {
	tests := []struct {
		name string
		ptr  pointer
		want string
	}{
		{"printable", pointer{"data", "größe"}, "/data/größe"},
		{"a newline and an escape", pointer{"data", "a\nb\x1b[31m"}, "/data/a\uFFFDb\uFFFD[31m"},
		{"format characters", pointer{"data", "x\u202edcba\u200b"}, "/data/x\uFFFDdcba\uFFFD"},
		{"C1 controls and bytes that are not UTF-8", pointer{"data", "\u009b1m\xff\xfe"}, "/data/\uFFFD1m\uFFFD"},
		{"cut after the replacement", pointer{"data", strings.Repeat("\n", 300)},
			"/data/" + strings.Repeat("\uFFFD", (maxPointer-len("/data/")-len("…"))/3) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := boundedPointer(tt.ptr); got != tt.want || len(got) > maxPointer {
				t.Errorf("boundedPointer = %q, want %q", got, tt.want)
			}
		})
	}

	// Through a drift record, its manager included.
	p := &planned{obj: configMap(map[string]any{"a\nb": "1"})}
	live := configMap(map[string]any{}, metav1.ManagedFieldsEntry{Manager: "kubectl\u202e-edit", Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: time.Now()}})
	d := DescribeDrift(driftOf(p, live, handEdits{fields: &fieldpath.Set{}}, time.Now()))
	if want := "ConfigMap shop/web (/data/a\uFFFDb by kubectl\uFFFD-edit)"; d != want || !utf8.ValidString(d) ||
		strings.ContainsFunc(d, func(r rune) bool { return unicode.In(r, unicode.Cc, unicode.Cf) }) {
		t.Errorf("drift described as %q, want %q", d, want)
	}
}

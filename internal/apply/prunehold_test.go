// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// decideHoldsCase is one row of TestDecideHolds.
type decideHoldsCase struct {
	name    string
	leaving []ObjectKey
	errs    []*ObjectError
	// want are the entries held; all says whether each was held by a
	// failure that holds everything.
	want []ObjectKey
	all  bool
}

// decideHoldsCases are the entries leaving a manifest and the failures
// that may hold them.
func decideHoldsCases() []decideHoldsCase {
	cm := func(ns, name string) ObjectKey { return ObjectKey{kind: "ConfigMap", namespace: ns, name: name} }
	rb := ObjectKey{group: "rbac.authorization.k8s.io", kind: "RoleBinding", namespace: "team-a", name: "read"}
	gatewayX := ObjectKey{group: "gateway.networking.k8s.io", kind: "Gateway", namespace: "team-a", name: "edge"}
	gatewayY := ObjectKey{group: "networking.example.com", kind: "Gateway", namespace: "team-a", name: "edge"}
	failing := func(k ObjectKey, reason string) *ObjectError {
		return &ObjectError{Key: k, Index: 0, Reason: reason, Err: errors.New("refused")}
	}
	return []decideHoldsCase{
		{name: "nothing fails: nothing is held", leaving: []ObjectKey{rb, cm("team-a", "old")}},
		{
			name:    "a failing ConfigMap does not hold a RoleBinding that left the manifest",
			leaving: []ObjectKey{rb},
			errs:    []*ObjectError{failing(cm("platform", "shared"), v1alpha1.ReasonImmutableSet)},
		},
		{
			name:    "a failing object holds its namesake moved from another namespace",
			leaving: []ObjectKey{cm("team-a", "settings"), cm("team-a", "other"), rb},
			errs:    []*ObjectError{failing(cm("team-b", "settings"), v1alpha1.ReasonForbidden)},
			want:    []ObjectKey{cm("team-a", "settings")},
		},
		{
			name:    "a failing object holds its namesake of another API group",
			leaving: []ObjectKey{gatewayX},
			errs:    []*ObjectError{failing(gatewayY, v1alpha1.ReasonUnknownKind)},
			want:    []ObjectKey{gatewayX},
		},
		{
			name:    "another kind of the same name is not held",
			leaving: []ObjectKey{{kind: "Secret", namespace: "team-a", name: "settings"}},
			errs:    []*ObjectError{failing(cm("team-a", "settings"), v1alpha1.ReasonApplyFailed)},
		},
		{
			name:    "a failure of no object (a manifest error) holds every prune",
			leaving: []ObjectKey{rb, cm("team-a", "old")},
			errs:    []*ObjectError{{Index: 2, Reason: v1alpha1.ReasonUnknownKind, Err: errors.New("no kind Widget")}},
			want:    []ObjectKey{rb, cm("team-a", "old")},
			all:     true,
		},
		{
			name:    "a destination that stopped answering holds every prune",
			leaving: []ObjectKey{rb},
			errs:    []*ObjectError{{Key: cm("team-a", "x"), Index: 0, Reason: v1alpha1.ReasonDestinationError, Err: errors.New("connection refused")}},
			want:    []ObjectKey{rb},
			all:     true,
		},
		{
			name:    "running out of time holds every prune",
			leaving: []ObjectKey{rb},
			errs:    []*ObjectError{{Index: -1, Reason: v1alpha1.ReasonReconcileTimeout, Err: errors.New("out of time")}},
			want:    []ObjectKey{rb},
			all:     true,
		},
		{
			name:    "a prune that failed holds no other",
			leaving: []ObjectKey{rb, cm("team-a", "read")},
			errs:    []*ObjectError{{Key: ObjectKey{kind: "RoleBinding", namespace: "team-b", name: "read"}, Index: -1, Reason: v1alpha1.ReasonPruneFailed, Err: errors.New("conflict")}},
		},
	}
}

func TestDecideHolds(t *testing.T) {
	for _, tc := range decideHoldsCases() {
		t.Run(tc.name, func(t *testing.T) {
			held := decideHolds(tc.leaving, tc.errs)
			got := slices.SortedFunc(maps.Keys(held), func(a, b ObjectKey) int { return strings.Compare(a.String()+a.group, b.String()+b.group) })
			want := slices.SortedFunc(slices.Values(tc.want), func(a, b ObjectKey) int { return strings.Compare(a.String()+a.group, b.String()+b.group) })
			if !slices.Equal(got, want) {
				t.Fatalf("held %v, want %v", got, want)
			}
			for k, h := range held {
				if h.All != tc.all || h.By == "" || h.Object != k.String() {
					t.Errorf("hold of %s is %+v, want All %v and a reason", k, h, tc.all)
				}
			}
		})
	}
}

// The message names the failing object, counts every held prune and names
// a bounded number of them, whatever their number.
func TestHeldMessageIsBounded(t *testing.T) {
	var holds []PruneHold
	for i := range 1000 {
		holds = append(holds, PruneHold{Object: "ConfigMap team-a/" + strings.Repeat("x", 250) + string(rune('a'+i%26)), By: "ConfigMap team-b/" + strings.Repeat("y", 253)})
	}
	msg := HeldMessage(holds)
	if !strings.HasPrefix(msg, "1000 prunes held back") || !strings.Contains(msg, "team-b/yyy") || !strings.HasSuffix(msg, " and 995 more") {
		t.Errorf("message %.200q..., want the count, the failing object and how many more", msg)
	}
	if len(msg) > 4096 {
		t.Errorf("message of %d bytes, want at most 4096", len(msg))
	}
	if HeldMessage(nil) != "" {
		t.Error("a message with nothing held")
	}
}

func TestImmutableDrift(t *testing.T) {
	obj := func(kind string, immutable any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": "x"}}}
		if immutable != nil {
			u.Object["immutable"] = immutable
		}
		return u
	}
	for _, tc := range []struct {
		name          string
		desired, live *unstructured.Unstructured
		want          bool
	}{
		{"a ConfigMap made immutable, not by the manifest", obj("ConfigMap", nil), obj("ConfigMap", true), true},
		{"a Secret made immutable while the manifest says false", obj("Secret", false), obj("Secret", true), true},
		{"the manifest asks it", obj("ConfigMap", true), obj("ConfigMap", true), false},
		{"not immutable", obj("ConfigMap", nil), obj("ConfigMap", false), false},
		{"another kind", obj("Service", nil), obj("Service", true), false},
		{"no live object", obj("ConfigMap", nil), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := immutableDrift(tc.desired, tc.live); got != tc.want {
				t.Errorf("immutableDrift = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestImmutableManager(t *testing.T) {
	entry := func(manager, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	mf := []metav1.ManagedFieldsEntry{
		{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:key":{}}}`)}},
		entry("kubectl-patch", `{"f:immutable":{}}`),
	}
	if who, ok := immutableManager(mf); !ok || who != "kubectl-patch" {
		t.Errorf("manager %q, %v; want kubectl-patch", who, ok)
	}
	if _, ok := immutableManager(mf[:1]); ok {
		t.Error("a manager named for a field nobody owns")
	}
}

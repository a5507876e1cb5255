// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// decideCase is one row of TestDecideChoosesOneActionPerObject.
type decideCase struct {
	name    string
	desired *unstructured.Unstructured
	policy  objectPolicy
	in      evidence
	// hand edits are parsed from live's managedFields, kubectl-edit being
	// the hand-edit manager.
	want actionKind
	// check, when set, looks at the rest of the action.
	check func(t *testing.T, a action)
}

// withVersion is u with resourceVersion rv.
func withVersion(u *unstructured.Unstructured, rv string) *unstructured.Unstructured {
	u.SetResourceVersion(rv)
	return u
}

// frozen is u made immutable.
func frozen(u *unstructured.Unstructured) *unstructured.Unstructured {
	u.Object["immutable"] = true
	return u
}

// withLabels is u with labels.
func withLabels(u *unstructured.Unstructured, labels map[string]string) *unstructured.Unstructured {
	u.SetLabels(labels)
	return u
}

// decideFixtures are the objects and entries the cases of decide share.
type decideFixtures struct {
	want, stale                                        map[string]any
	owned, marked                                      map[string]string
	vidraOwnsA, patchOwnsImmutable, vidraOwnsImmutable metav1.ManagedFieldsEntry
}

func newDecideFixtures() decideFixtures {
	return decideFixtures{
		want: map[string]any{"a": "1"}, stale: map[string]any{"a": "0"},
		owned:              map[string]string{v1alpha1.OwnerUIDLabel: "u"},
		marked:             map[string]string{v1alpha1.OwnerUIDLabel: "u", v1alpha1.BucketLabel: "3"},
		vidraOwnsA:         fieldsEntry("vidra", `{"f:data":{"f:a":{}}}`),
		patchOwnsImmutable: fieldsEntry("kubectl-patch", `{"f:immutable":{}}`),
		vidraOwnsImmutable: fieldsEntry("vidra", `{"f:immutable":{}}`),
	}
}

// edit is a managedFields entry of the hand-edit manager.
func edit(fields string) metav1.ManagedFieldsEntry { return fieldsEntry("kubectl-edit", fields) }

func decideCases() []decideCase {
	f := newDecideFixtures()
	return slices.Concat(decideAbsentCases(f), decideLiveCases(f), decideWriteCases(f), decideHandEditCases(f))
}

// decideAbsentCases are the decisions on an object no cache or read shows.
func decideAbsentCases(f decideFixtures) []decideCase {
	return []decideCase{
		{name: "an absent object is created",
			desired: configMap(f.want),
			want:    actCreate},
		{name: "an object known to exist unmarked is read before it is created",
			desired: configMap(f.want),
			in:      evidence{unmanaged: true},
			want:    actRead},
		{name: "an object read gone after it was unmarked is created",
			desired: configMap(f.want),
			in:      evidence{unmanaged: true, fresh: true},
			want:    actCreate},
		{name: "a deletion under driftPolicy Report is read before it is reported",
			desired: configMap(f.want),
			in:      evidence{report: true, unchanged: true, inventory: true},
			want:    actRead},
		{name: "a deletion a read confirmed is reported under driftPolicy Report",
			desired: configMap(f.want),
			in:      evidence{report: true, unchanged: true, inventory: true, fresh: true},
			want:    actReportDrift,
			check: func(t *testing.T, a action) {
				if a.drift == nil || !a.drift.Deleted || a.object != nil {
					t.Errorf("reports %+v of %v, f.want a deletion", a.drift, a.object)
				}
			}},
		{name: "an object never in the inventory is created under driftPolicy Report",
			desired: configMap(f.want),
			in:      evidence{report: true, unchanged: true, fresh: true},
			want:    actCreate},
	}
}

// decideLiveCases are the decisions on a live object before any write is considered: its owner, its policy, an immutable flag set by another writer.
func decideLiveCases(f decideFixtures) []decideCase {
	refusal := &ObjectError{Reason: v1alpha1.ReasonOwnedByOther, Conflict: true}
	return []decideCase{
		{name: "another owner's object is a conflict",
			desired: configMap(f.want),
			in:      evidence{live: configMap(f.want), owner: refusal},
			want:    actConflict,
			check: func(t *testing.T, a action) {
				if a.err != refusal {
					t.Errorf("err = %v, f.want the owner check's", a.err)
				}
			}},
		{name: "an existing object of apply: IfNotPresent is left as it is",
			desired: configMap(f.want),
			policy:  objectPolicy{createOnly: true},
			in:      evidence{live: configMap(map[string]any{"a": "changed"}, edit(`{"f:data":{"f:a":{}}}`)), unchanged: true},
			want:    actCreateOnly},
		{name: "an object made immutable by another writer is read whole",
			desired: configMap(f.want),
			in:      evidence{live: frozen(configMap(f.want))},
			want:    actReadWhole},
		{name: "an object made immutable by another writer is refused without force",
			desired: configMap(f.want),
			in:      evidence{live: frozen(configMap(f.want)), wholeRead: true, whole: frozen(configMap(f.want, f.patchOwnsImmutable))},
			want:    actRefuse,
			check: func(t *testing.T, a action) {
				if a.err == nil || a.err.Reason != v1alpha1.ReasonImmutableSet {
					t.Errorf("err = %v, f.want %s", a.err, v1alpha1.ReasonImmutableSet)
				}
			}},
		{name: "an object made immutable by another writer is recreated under force",
			desired: configMap(f.want),
			in:      evidence{live: frozen(configMap(f.want)), wholeRead: true, whole: frozen(configMap(f.want, f.patchOwnsImmutable)), force: true},
			want:    actRecreate,
			check: func(t *testing.T, a action) {
				if a.writer != "field manager kubectl-patch" || a.drift == nil || a.drift.Manager != "kubectl-patch" {
					t.Errorf("writer %q, drift %+v: f.want kubectl-patch's", a.writer, a.drift)
				}
			}},
		{name: "an object made immutable by another writer is reported under driftPolicy Report",
			desired: configMap(f.want),
			in:      evidence{live: frozen(configMap(f.want)), wholeRead: true, whole: frozen(configMap(f.want, f.patchOwnsImmutable)), force: true, report: true},
			want:    actReportDrift,
			check: func(t *testing.T, a action) {
				if a.drift == nil || !cmp.Equal(a.drift.Fields, []string{"/immutable"}) || a.object == nil {
					t.Errorf("reports %+v of %v, f.want /immutable of the object read whole", a.drift, a.object)
				}
			}},
		{name: "an immutable flag Vidra set is applied over, for the API server to refuse",
			desired: configMap(f.want),
			in:      evidence{live: frozen(configMap(f.stale)), wholeRead: true, whole: frozen(configMap(f.stale, f.vidraOwnsImmutable)), known: true, rec: appliedRecord{hash: 1}, hash: 2},
			want:    actApply},
		{name: "an immutable flag gone by the whole read is applied over",
			desired: configMap(f.want),
			in:      evidence{live: frozen(configMap(f.stale)), wholeRead: true, whole: configMap(f.stale), known: true, rec: appliedRecord{hash: 1}, hash: 2},
			want:    actApply},
	}
}

// decideWriteCases are the decisions between in sync, drift reported and the writes.
func decideWriteCases(f decideFixtures) []decideCase {
	return []decideCase{
		{name: "the version Vidra last applied is in sync",
			desired: configMap(f.want),
			in:      evidence{live: withVersion(configMap(map[string]any{"a": "2"}), "7"), known: true, rec: appliedRecord{hash: 1, rv: "7"}, hash: 1},
			want:    actInSync},
		{name: "a live object holding every field of the manifest is in sync",
			desired: configMap(f.want),
			in:      evidence{live: configMap(map[string]any{"a": "1", "b": "2"}, f.vidraOwnsA)},
			want:    actInSync},
		{name: "a changed manifest is applied",
			desired: configMap(f.want),
			in:      evidence{live: configMap(map[string]any{"a": "0"}), known: true, rec: appliedRecord{hash: 1}, hash: 2},
			want:    actApply,
			check: func(t *testing.T, a action) {
				if a.drift != nil || a.marks {
					t.Errorf("drift %+v, marks %v: a manifest change is neither", a.drift, a.marks)
				}
			}},
		{name: "a dropped field is applied away though live holds the new manifest",
			desired: configMap(f.want),
			in:      evidence{live: configMap(map[string]any{"a": "1", "dropped": "x"}), known: true, rec: appliedRecord{hash: 1}, hash: 2},
			want:    actApply},
		{name: "drift is corrected",
			desired: configMap(f.want),
			in:      evidence{live: configMap(map[string]any{"a": "0"}), unchanged: true},
			want:    actApply,
			check: func(t *testing.T, a action) {
				if a.drift == nil || !cmp.Equal(a.drift.Fields, []string{"/data/a"}) {
					t.Errorf("corrects %+v, f.want /data/a", a.drift)
				}
			}},
		{name: "drift is reported under driftPolicy Report",
			desired: configMap(f.want),
			in:      evidence{live: configMap(map[string]any{"a": "0"}), unchanged: true, report: true},
			want:    actReportDrift,
			check: func(t *testing.T, a action) {
				if a.drift == nil || a.object == nil {
					t.Errorf("reports %+v of %v, f.want the drift of live", a.drift, a.object)
				}
			}},
		{name: "a hand edit undone by hand is no drift to report",
			desired: configMap(f.want),
			in:      evidence{live: configMap(f.want, edit(`{"f:data":{"f:a":{}}}`)), unchanged: true, report: true},
			want:    actReportDrift,
			check: func(t *testing.T, a action) {
				if a.drift != nil || a.object == nil {
					t.Errorf("reports %+v, f.want nothing", a.drift)
				}
			}},
		{name: "missing marks alone are written as marks",
			desired: withLabels(configMap(f.want), f.marked),
			in:      evidence{live: withLabels(configMap(f.want), f.owned), unchanged: true},
			want:    actMarksOnly,
			check: func(t *testing.T, a action) {
				if !a.marks || a.drift != nil {
					t.Errorf("marks %v, drift %+v: f.want marks and no drift", a.marks, a.drift)
				}
			}},
	}
}

// decideHandEditCases are the decisions on a live object with hand edits.
func decideHandEditCases(f decideFixtures) []decideCase {
	return []decideCase{
		{name: "a hand edit of the manifest's fields is taken back by the apply",
			desired: configMap(f.want),
			in:      evidence{live: configMap(map[string]any{"a": "0"}, edit(`{"f:data":{"f:a":{}}}`)), unchanged: true},
			want:    actTakeBack,
			check: func(t *testing.T, a action) {
				if !cmp.Equal(a.managers, []string{"kubectl-edit"}) || a.drift == nil {
					t.Errorf("managers %v, drift %+v: f.want kubectl-edit's drift", a.managers, a.drift)
				}
			}},
		{name: "labels added by hand are removed",
			desired: configMap(f.want),
			in:      evidence{live: withLabels(configMap(f.want, edit(`{"f:metadata":{"f:labels":{"f:extra":{}}}}`)), map[string]string{"extra": "x"})},
			want:    actRemoveKeys,
			check: func(t *testing.T, a action) {
				if !cmp.Equal(a.keys, [][]string{{"metadata", "labels", "extra"}}) {
					t.Errorf("keys = %v, f.want the extra label", a.keys)
				}
			}},
		{name: "fields added by hand are taken over",
			desired: configMap(f.want),
			in:      evidence{live: configMap(map[string]any{"a": "1", "b": "2"}, edit(`{"f:data":{"f:b":{}}}`))},
			want:    actTakeOver},
		{name: "missing marks with a hand edit are taken back with the marks",
			desired: withLabels(configMap(f.want), f.marked),
			in:      evidence{live: withLabels(configMap(f.stale, edit(`{"f:data":{"f:a":{}}}`)), f.owned), unchanged: true},
			want:    actTakeBack,
			check: func(t *testing.T, a action) {
				if a.marks {
					t.Errorf("marks only, with a hand edit's drift to correct")
				}
			}},
	}
}

// Every action decide can choose, each from the evidence that calls for it:
// the decision is a value, taken without a request.
func TestDecideChoosesOneActionPerObject(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	covered := map[actionKind]bool{}
	for _, tc := range decideCases() {
		t.Run(tc.name, func(t *testing.T) {
			p := &planned{obj: tc.desired, key: keyOf(tc.desired), policy: tc.policy}
			in := tc.in
			in.now = now
			if in.live != nil && in.owner == nil {
				in.hand = parseHandEdits(in.live.GetManagedFields(), []string{"kubectl-edit"}, p.notIgnored)
			}
			a := decide(p, &in)
			covered[a.kind] = true
			if a.kind != tc.want {
				t.Fatalf("decide = %v (%s), want %v", a.kind, a.reason, tc.want)
			}
			if a.reason == "" {
				t.Errorf("%v without a reason", a.kind)
			}
			if tc.check != nil {
				tc.check(t, a)
			}
		})
	}
	for k := range actionKind(len(actionNames)) {
		if !covered[k] {
			t.Errorf("no case decides %v", k)
		}
	}
}

// Whether a write would correct drift: the record decides when there is one.
func TestUnchangedSinceTheLastApply(t *testing.T) {
	tests := []struct {
		name                string
		rec                 appliedRecord
		known               bool
		inventory, observed bool
		want                bool
	}{
		{name: "same hash", rec: appliedRecord{hash: 1}, known: true, want: true},
		{name: "other hash", rec: appliedRecord{hash: 2}, known: true, inventory: true, observed: true, want: false},
		{name: "no record, inventoried at the observed generation", inventory: true, observed: true, want: true},
		{name: "no record, a generation the status does not describe", inventory: true, want: false},
		{name: "no record, not inventoried", observed: true, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := unchangedSince(tc.rec, tc.known, 1, tc.inventory, tc.observed); got != tc.want {
				t.Errorf("unchangedSince = %v, want %v", got, tc.want)
			}
		})
	}
}

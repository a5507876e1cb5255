// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/health"
	"github.com/vidra-operator/vidra/internal/statusfit"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// boundedManager is the longest field manager a drift record names, made
// of '<'.
var boundedManager = strings.Repeat("<", 128-len("…")) + "…"

// hostileOutcome is what a pass may find on a destination whose objects and
// writers are someone else's: every object of a large manifest not healthy,
// with health messages of '<', which JSON writes in 6 bytes each; drift
// records of 16 fields made of '<', by manager; and a full drift history of
// the same, by boundedManager.
func hostileOutcome(objects, drifted int, manager string) apply.Outcome {
	at := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	record := func(i int, manager string) v1alpha1.DriftRecord {
		fields := make([]string, 16)
		for j := range fields {
			fields[j] = fmt.Sprintf("/data/%s%02d", strings.Repeat("<", 250), j)
		}
		return v1alpha1.DriftRecord{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: fmt.Sprintf("cm-%04d", i),
			Fields: fields, Manager: manager, Time: at}
	}
	var out apply.Outcome
	for i := range objects {
		out.Inventory = append(out.Inventory, v1alpha1.ManagedResource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a",
			Name: fmt.Sprintf("cm-%04d", i), Health: string(health.InProgress), HealthMessage: strings.Repeat("<", health.MaxMessage)})
	}
	for i := range drifted {
		out.Drift = append(out.Drift, record(i, manager))
	}
	for i := range 10 {
		out.DriftHistory = append(out.DriftHistory, record(drifted+i, boundedManager))
	}
	return out
}

// A status holds what others wrote: health messages, hand edits' fields,
// field managers' names, which a remote destination's server may make as
// long as it likes. Measured with encoding/json, 100 such drift records came
// to 2.28 MB, 1000 such inventory entries to 1.36 MB, one record naming a
// 512 KiB manager to 547 KB, and every status write failed for good past
// etcd's 1.5 MiB. The status now stays within 512 KiB as JSON, says what it
// left out, and a second sync of the same state writes nothing.
func TestStatusStaysWithinItsSizeLimit(t *testing.T) {
	for _, tc := range []struct {
		name             string
		objects, drifted int
		manager          string
		// want are the omissions, -1 for "some".
		want v1alpha1.StatusOmissions
	}{
		{name: "1000 objects, messages of '<'", objects: 1000, want: v1alpha1.StatusOmissions{DriftHistory: 10, HealthMessages: 1000}},
		{name: "drift of 100 objects, keys of '<'", objects: 100, drifted: 100, manager: boundedManager,
			want: v1alpha1.StatusOmissions{DriftHistory: 10, Drift: -1}},
		{name: "drift of 150 objects of 1000", objects: 1000, drifted: 150, manager: boundedManager,
			want: v1alpha1.StatusOmissions{DriftHistory: 10, Drift: 150, HealthMessages: 1000}},
		// The engine cuts a manager's name to 128 bytes; the limit holds
		// without it.
		{name: "drift by a manager of 1 MiB", objects: 10, drifted: 2, manager: strings.Repeat("m", 1<<20),
			want: v1alpha1.StatusOmissions{DriftHistory: 10, Drift: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vr := newVR(operatorNS, "big", configMapManifest, func(vr *v1alpha1.VidraResource) {
				vr.Spec.DriftPolicy = v1alpha1.DriftPolicyReport
			})
			f := newFixture(t, []*v1alpha1.VidraResource{vr})
			c := f.newController()
			write := func(vr *v1alpha1.VidraResource) {
				t.Helper()
				pass := c.engine.NewPass(vr, nil)
				pass.Out = hostileOutcome(tc.objects, tc.drifted, tc.manager)
				if _, err := c.writeStatus(context.Background(), pass, &v1alpha1.ClusterReference{}); err != nil {
					t.Fatal(err)
				}
			}
			write(vr.DeepCopy())
			f.mu.Lock()
			if len(f.statuses) != 1 {
				f.mu.Unlock()
				t.Fatalf("%d statuses written, want 1", len(f.statuses))
			}
			written := f.statuses[0]
			f.statuses = nil
			f.mu.Unlock()

			b, err := json.Marshal(written)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > statusfit.MaxBytes || !json.Valid(b) || !utf8.Valid(b) {
				t.Errorf("status of %d bytes as JSON, over the limit of %d, or not valid", len(b), statusfit.MaxBytes)
			}
			if len(written.ManagedResources) != tc.objects || int(written.ManagedCount) != tc.objects {
				t.Errorf("inventory of %d entries (count %d), want all %d", len(written.ManagedResources), written.ManagedCount, tc.objects)
			}
			om := written.Omitted
			if om == nil {
				t.Fatal("nothing said to be left out")
			}
			if om.DriftHistory != tc.want.DriftHistory || om.HealthMessages != tc.want.HealthMessages ||
				(tc.want.Drift >= 0 && om.Drift != tc.want.Drift) || (tc.want.Drift < 0 && om.Drift <= 0) {
				t.Errorf("omitted %+v, want %+v", *om, tc.want)
			}
			if got := int(om.Drift) + len(written.Drift); got != tc.drifted {
				t.Errorf("%d drift records listed and %d left out, want %d in all", len(written.Drift), om.Drift, tc.drifted)
			}
			if len(written.DriftHistory)+int(om.DriftHistory) != 10 {
				t.Errorf("%d corrections listed and %d left out, want 10 in all", len(written.DriftHistory), om.DriftHistory)
			}
			for _, m := range written.ManagedResources {
				if !strings.HasPrefix(strings.Repeat("<", health.MaxMessage), strings.TrimSuffix(m.HealthMessage, "…")) || m.HealthMessage == "" {
					t.Fatalf("health message %q is not the start of the object's", m.HealthMessage)
				}
			}
			if d := written.Drift; len(d) > 0 && d[len(d)-1].Name != fmt.Sprintf("cm-%04d", len(d)-1) {
				t.Errorf("status.drift lists %s last, want the first records of the list", d[len(d)-1].Name)
			}

			next := vr.DeepCopy()
			next.Status = written
			write(next)
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.statuses) > 0 {
				t.Errorf("the same state, with the status written, was written again: omitted %+v, then %+v", *om, f.statuses[0].Omitted)
			}
		})
	}
}

// Under the limit, nothing is left out, and status.omitted is absent, but
// for the drift past the first 100 objects, which the status never lists.
func TestStatusUnderItsSizeLimitLeavesNothingOut(t *testing.T) {
	small := func(drifted int) *v1alpha1.VidraResourceStatus {
		out := hostileOutcome(3, 0, "")
		st := &v1alpha1.VidraResourceStatus{ManagedResources: out.Inventory}
		for i := range drifted {
			st.Drift = append(st.Drift, v1alpha1.DriftRecord{Kind: "ConfigMap", Name: fmt.Sprint(i), Fields: []string{"/data/a"}})
		}
		return st
	}
	st := small(2)
	statusfit.Fit(st, 2)
	if st.Omitted != nil || len(st.Drift) != 2 || st.ManagedResources[0].HealthMessage != strings.Repeat("<", health.MaxMessage) {
		t.Errorf("a small status was changed: omitted %+v, %d drift records", st.Omitted, len(st.Drift))
	}
	st = small(maxDriftRecords)
	statusfit.Fit(st, maxDriftRecords+20)
	if st.Omitted == nil || *st.Omitted != (v1alpha1.StatusOmissions{Drift: 20}) || len(st.Drift) != maxDriftRecords {
		t.Errorf("omitted %+v with %d drift records, want the 20 past the first %d", st.Omitted, len(st.Drift), maxDriftRecords)
	}
}

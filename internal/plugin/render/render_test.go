// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }

// sample is a resource with one healthy and one failing object, a drift
// correction in its history and a conflict about one object.
func sample() *v1alpha1.VidraResource {
	return &v1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", Generation: 2, UID: "u1", CreationTimestamp: ago(3 * 24 * time.Hour)},
		Spec:       v1alpha1.VidraResourceSpec{Manifest: "x"},
		Status: v1alpha1.VidraResourceStatus{
			ObservedGeneration: 2,
			DeployState:        v1alpha1.DeployStateFailed,
			Conditions: []metav1.Condition{
				{Type: "Healthy", Status: "False", Reason: "Degraded", Message: "Deployment team-a/web failed", ObservedGeneration: 2, LastTransitionTime: ago(time.Minute)},
				{Type: "Conflict", Status: "True", Reason: "OwnedByOtherResource", Message: "ConfigMap team-a/shared (document 2): owned by VidraResource team-b/other", ObservedGeneration: 2, LastTransitionTime: ago(time.Minute)},
				{Type: "Ready", Status: "False", Reason: "OwnedByOtherResource", Message: "ConfigMap team-a/shared (document 2): owned by VidraResource team-b/other", ObservedGeneration: 2, LastTransitionTime: ago(2 * time.Minute)},
				{Type: "Stalled", Status: "True", Reason: "OwnedByOtherResource", Message: "ConfigMap team-a/shared (document 2): owned by VidraResource team-b/other", ObservedGeneration: 2, LastTransitionTime: ago(2 * time.Minute)},
			},
			ManagedResources: []v1alpha1.ManagedResource{
				{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "config", Health: "Current"},
				{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team-a", Name: "web", Health: "Failed", HealthMessage: "Progress deadline exceeded"},
				{APIVersion: "v1", Kind: "Namespace", Name: "team-a", Health: "Current"},
				{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "shared", Health: "Current"},
			},
			DriftHistory: []v1alpha1.DriftRecord{
				{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "config", Fields: []string{"/data/a", "/data/b"}, Manager: "kubectl-edit", Time: ago(5 * time.Minute)},
				{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "config", Deleted: true, Time: ago(time.Hour)},
			},
		},
	}
}

func TestTableAlignsColumnsAsKubectlGet(t *testing.T) {
	other := v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "a-much-longer-name", Namespace: "default", CreationTimestamp: ago(90 * time.Second)}}
	items := []v1alpha1.VidraResource{*sample(), other}
	var b strings.Builder
	if err := Table(&b, items, TableOptions{Options: Options{Now: now}, AllNamespaces: true}); err != nil {
		t.Fatal(err)
	}
	want := `NAMESPACE   NAME                 READY     STATUS   HEALTHY   MANAGED   DRIFTED   CORRECTED   AGE
team-a      web                  False     Failed   3/4       4         0         2           3d
default     a-much-longer-name   Unknown   <none>   0/0       0         0         0           90s
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}

	b.Reset()
	if err := Table(&b, items[:1], TableOptions{Options: Options{Now: now}, Wide: true}); err != nil {
		t.Fatal(err)
	}
	want = `NAME   READY   STATUS   HEALTHY   MANAGED   DRIFTED   CORRECTED   AGE   SUSPENDED   LAST SYNC   MESSAGE
web    False   Failed   3/4       4         0         2           3d    false       <none>      ConfigMap team-a/shared (document 2): owned by VidraResource team-b/other
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("wide table (-want +got):\n%s", diff)
	}
}

func TestTableColoursOnlyWhenAsked(t *testing.T) {
	var b strings.Builder
	if err := Table(&b, []v1alpha1.VidraResource{*sample()}, TableOptions{Options: Options{Now: now, Color: true}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), red+"False"+reset) {
		t.Errorf("no red False:\n%q", b.String())
	}
}

func TestTreeShowsHealthDriftAndConflictsPerObject(t *testing.T) {
	var b strings.Builder
	if err := WriteTree(&b, NewTree(sample()), Options{Now: now}); err != nil {
		t.Fatal(err)
	}
	want := `NAMESPACE   NAME                 READY   HEALTH     DRIFT                                               MESSAGE
team-a      VidraResource/web    False   Degraded                                                       OwnedByOtherResource
team-a      ├─ConfigMap/config           Current    corrected 5m ago: /data/a,/data/b by kubectl-edit
team-a      ├─Deployment/web             Failed                                                         Progress deadline exceeded
-           ├─Namespace/team-a           Current
team-a      └─ConfigMap/shared           Current                                                        conflict: owned by VidraResource team-b/other
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("tree (-want +got):\n%s", diff)
	}
}

func TestTreeInReportModeShowsTheDriftThatStays(t *testing.T) {
	vr := sample()
	vr.Spec.DriftPolicy = v1alpha1.DriftPolicyReport
	vr.Status.Drift = []v1alpha1.DriftRecord{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "team-a", Name: "web", Fields: []string{"/spec/replicas"}, Manager: "kubectl-scale", Time: ago(time.Minute)}}
	tree := NewTree(vr)
	if got := drift(tree.Objects[1], now); got != "drifted 60s ago: /spec/replicas by kubectl-scale" {
		t.Errorf("drift of the Deployment: %q", got)
	}
	if got := rootDrift(tree); got != "1 drifted (Report)" {
		t.Errorf("drift of the resource: %q", got)
	}
	if got := drift(tree.Objects[0], now); got != "corrected 5m ago: /data/a,/data/b by kubectl-edit" {
		t.Errorf("a correction of the history, in Report mode: %q", got)
	}
}

func TestExplainNamesTheFailingObjectsEventsAndTheNextAttempt(t *testing.T) {
	vr := sample()
	events := []corev1.Event{
		{Type: "Warning", Reason: "Conflict", Message: "ConfigMap team-a/shared: owned by team-b/other", Count: 3, LastTimestamp: ago(time.Minute), InvolvedObject: corev1.ObjectReference{Name: "web", UID: "u1"}},
		{Type: "Normal", Reason: "Applied", Message: "applied", LastTimestamp: ago(time.Minute), InvolvedObject: corev1.ObjectReference{Name: "web", UID: "u1"}},
		{Type: "Warning", Reason: "ApplyFailed", Message: "of a resource deleted and created again", LastTimestamp: ago(time.Minute), InvolvedObject: corev1.ObjectReference{Name: "web", UID: "u0"}},
	}
	var b strings.Builder
	if err := WriteExplanation(&b, Explain(vr, events, now), Options{Now: now}); err != nil {
		t.Fatal(err)
	}
	want := `VidraResource team-a/web is not Ready.

Conditions:
  Ready        False   OwnedByOtherResource (2m ago)
               ConfigMap team-a/shared (document 2): owned by VidraResource team-b/other
  Stalled      True    OwnedByOtherResource (2m ago)
               (the message of Ready)
  Conflict     True    OwnedByOtherResource (60s ago)
               (the message of Ready)
  Healthy      False   Degraded (60s ago)
               Deployment team-a/web failed

Objects failing or not healthy:
  ConfigMap team-a/shared
      owned by VidraResource team-b/other
  Deployment team-a/web
      Failed: Progress deadline exceeded

Recent warning events:
  60s ago  Conflict (x3): ConfigMap team-a/shared: owned by team-b/other

Next attempt: after a change: Vidra does not retry this on its own; fix the resource (a new generation is reconciled at once), then ` + "`kubectl vidra reconcile web -n team-a`" + ` if the fix was elsewhere; besides, it is re-checked periodically (the operator's requeueResourcesAfter, 10m by default)
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("explanation (-want +got):\n%s", diff)
	}
}

// TestExplainTellsObjectErrorsWithAndWithoutADocument: an object in no
// document (one pruned) is named without "(document N)", and still listed
// as a failing object; a message that only looks alike is not.
func TestExplainTellsObjectErrorsWithAndWithoutADocument(t *testing.T) {
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", Generation: 1}}
	vr.Status.ObservedGeneration = 1
	vr.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: "False", Reason: "PruneRefused", ObservedGeneration: 1,
		Message: "ConfigMap team-a/a (document 1): bad; Namespace old: left the manifest but was not deleted; " +
			`Get "https://10.0.0.1/version": API server https://10.0.0.1 is unreachable: refused`}}
	x := Explain(vr, nil, now)
	want := []Failure{{Object: "ConfigMap team-a/a", Problem: "bad"}, {Object: "Namespace old", Problem: "left the manifest but was not deleted"}}
	if diff := cmp.Diff(want, x.Failing); diff != "" {
		t.Errorf("failing objects (-want +got):\n%s", diff)
	}
	if len(x.Problems) != 1 || !strings.HasPrefix(x.Problems[0], "Get ") {
		t.Errorf("problems = %q, want the unreachable message alone", x.Problems)
	}
}

// TestTreeStripsTheDocumentFromAConflict: the tree names the object, so
// the conflict under it starts with what is wrong.
func TestTreeStripsTheDocumentFromAConflict(t *testing.T) {
	vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a"}}
	vr.Status.ManagedResources = []v1alpha1.ManagedResource{
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "a"},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "b"},
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team-a", Name: "c"},
	}
	vr.Status.Conditions = []metav1.Condition{{Type: "Conflict", Status: "True", Reason: "FieldConflict",
		Message: "ConfigMap team-a/a (document 3): owned by x; ConfigMap team-a/b: gone by hand; ConfigMap team-a/c (/data/k) was changed by rival 3 times"}}
	var got []string
	for _, o := range NewTree(vr).Objects {
		got = append(got, o.Conflict)
	}
	want := []string{"owned by x", "gone by hand", "(/data/k) was changed by rival 3 times"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conflicts (-want +got):\n%s", diff)
	}
}

func TestNextAttempt(t *testing.T) {
	cond := func(typ, status, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, ObservedGeneration: 1}
	}
	tests := []struct {
		name   string
		mutate func(*v1alpha1.VidraResource)
		want   string
	}{
		{"suspended", func(vr *v1alpha1.VidraResource) { vr.Spec.Suspend = true }, "nothing: the resource is suspended; `kubectl vidra resume web -n team-a` resumes it"},
		{"not reconciled", func(vr *v1alpha1.VidraResource) { vr.Generation = 2 }, "the operator has not reconciled the latest change yet"},
		{"dependency", func(vr *v1alpha1.VidraResource) {
			vr.Status.Conditions = []metav1.Condition{cond("Ready", "False", v1alpha1.ReasonDependencyNotReady)}
		}, "when the dependency becomes Ready"},
		{"waiting for health", func(vr *v1alpha1.VidraResource) {
			vr.Spec.Wait = true
			start := ago(time.Minute)
			vr.Status.HealthCheckStartTime = &start
			vr.Status.Conditions = []metav1.Condition{cond("Ready", "False", v1alpha1.ReasonProgressing)}
		}, "gives up at 2026-11-23T12:04:00Z (in 4m, spec.timeout 5m0s)"},
		{"retrying", func(vr *v1alpha1.VidraResource) {
			vr.Spec.Interval = &metav1.Duration{Duration: time.Minute}
			vr.Status.Conditions = []metav1.Condition{cond("Ready", "False", "ApplyFailed"), cond("Reconciling", "True", "Progressing")}
		}, "`kubectl vidra reconcile web -n team-a` tries now"},
		{"ready", func(vr *v1alpha1.VidraResource) {
			vr.Spec.Interval = &metav1.Duration{Duration: 0}
			vr.Status.Conditions = []metav1.Condition{cond("Ready", "True", "Reconciled")}
		}, "nothing to fix; Vidra corrects drift as it happens"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vr := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", Generation: 1}}
			vr.Status.ObservedGeneration = 1
			vr.Status.Conditions = []metav1.Condition{cond("Ready", "False", "X")}
			tc.mutate(vr)
			ready, _ := condition(vr, "Ready")
			if got := next(vr, ready == "True", now); !strings.Contains(got, tc.want) {
				t.Errorf("next = %q, want it to contain %q", got, tc.want)
			}
		})
	}
}

func TestMessagesCannotDriveTheTerminal(t *testing.T) {
	if got := OneLine("bad \x1b]0;title\x07 message\n"); strings.ContainsAny(got, "\x1b\x07\n") {
		t.Errorf("OneLine kept control characters: %q", got)
	}
}

// An Event moved from events.k8s.io to v1 keeps its drift history in the
// tree: the operator keys both as one object.
func TestFindDriftMatchesAnEventInEitherGroup(t *testing.T) {
	records := []v1alpha1.DriftRecord{{APIVersion: "events.k8s.io/v1", Kind: "Event", Namespace: "ns", Name: "e"}}
	if findDrift(records, v1alpha1.ManagedResource{APIVersion: "v1", Kind: "Event", Namespace: "ns", Name: "e"}) == nil {
		t.Error("the Event's drift was not found across its two groups")
	}
	if findDrift(records, v1alpha1.ManagedResource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "e"}) != nil {
		t.Error("another kind's drift was taken for the Event's")
	}
}

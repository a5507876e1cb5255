// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// What the alerts read: per namespace, the longest a resource has not been
// Ready (by the condition's last transition, by its creation when it has
// no condition yet, suspended ones aside), and the resources by condition:
// by namespace where the condition tells of a problem, for the cluster
// where it does not. Namespaces where all is well have no series.
func TestResourceStatusIsPerNamespaceAndAgesNotReady(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	vr := func(ns string, created time.Duration, suspend bool, conds ...metav1.Condition) *v1alpha1.VidraResource {
		r := &v1alpha1.VidraResource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, CreationTimestamp: ago(created)}}
		r.Spec.Suspend = suspend
		r.Status.Conditions = conds
		return r
	}
	cond := func(typ string, status metav1.ConditionStatus, reason string, since time.Duration) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: ago(since)}
	}
	counts, notReady := resourceStatus([]*v1alpha1.VidraResource{
		vr("a", time.Hour, false, cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled, 50*time.Minute)),
		vr("a", time.Hour, false, cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed, 12*time.Minute),
			cond(v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonApplyFailed, 12*time.Minute)),
		vr("a", 3*time.Minute, false),
		vr("b", 2*time.Hour, true, cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSuspended, time.Hour)),
		vr("c", time.Hour, false, cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReconciled, time.Minute),
			cond(v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonFieldConflict, time.Minute),
			cond(v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonReconciled, time.Minute),
			cond(v1alpha1.ConditionDrifted, metav1.ConditionFalse, v1alpha1.ReasonNoDrift, time.Minute)),
	}, now)

	wantAge := map[string]time.Duration{"a": 12 * time.Minute}
	if len(notReady) != len(wantAge) || notReady["a"] != wantAge["a"] {
		t.Errorf("not ready = %v, want %v: only the namespaces with a resource not Ready, suspended ones aside", notReady, wantAge)
	}
	wantCounts := map[conditionKey]int{
		{"", "Ready", "True", "Reconciled"}:        2,
		{"a", "Ready", "False", "ApplyFailed"}:     1,
		{"a", "Ready", "Unknown", ""}:              1,
		{"a", "Stalled", "True", "ApplyFailed"}:    1,
		{"", "Stalled", "False", "Reconciled"}:     1,
		{"b", "Ready", "False", "Suspended"}:       1,
		{"c", "Conflict", "True", "FieldConflict"}: 1,
		{"", "Drifted", "False", "NoDrift"}:        1,
	}
	if len(counts) != len(wantCounts) {
		t.Errorf("counts = %v, want %v", counts, wantCounts)
	}
	for k, want := range wantCounts {
		if counts[k] != want {
			t.Errorf("count %v = %d, want %d", k, counts[k], want)
		}
	}
}

// Every Reason constant of the API is a known reason, so that none reads
// as "other"; and a reason nobody declared does.
func TestKnownReasonsAreEveryReason(t *testing.T) {
	// Tests run in their package's directory.
	files, _ := filepath.Glob(filepath.Join("..", "..", "pkg/apis/infrahub/v1alpha1/*.go"))
	fset := token.NewFileSet()
	seen := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Reason") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						continue
					}
					value, _ := strconv.Unquote(lit.Value)
					seen++
					if reasonLabel(value) != value {
						t.Errorf("v1alpha1.%s (%q) is not in knownReasons: add it", name.Name, value)
					}
				}
			}
		}
	}
	if seen < 40 {
		t.Errorf("found %d Reason constants, want the API's (40 or more)", seen)
	}
	if got := reasonLabel("MadeUpByATenant"); got != "other" {
		t.Errorf("an undeclared reason is labelled %q, want other", got)
	}
}

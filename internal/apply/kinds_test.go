// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

func objectsOf(apiVersionKinds ...string) []manifest.Object {
	var out []manifest.Object
	for i, avk := range apiVersionKinds {
		av, kind, _ := strings.Cut(avk, " ")
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(av)
		u.SetKind(kind)
		u.SetName(fmt.Sprintf("o%d", i))
		out = append(out, manifest.Object{Object: u, Index: i})
	}
	return out
}

func TestManifestNamingMoreKindsThanItsNamespaceMayWatchIsRefused(t *testing.T) {
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf("hostile.example/v1 Thing%d", i)
	}
	for _, tc := range []struct {
		name  string
		objs  []manifest.Object
		limit int
		want  int // kinds counted; 0 when accepted
	}{
		{"no bound", objectsOf(many...), 0, 0},
		{"at the bound", objectsOf(many[:64]...), 64, 0},
		{"one past", objectsOf(many...), 64, 65},
		// Objects of one kind count once, whatever their number or API
		// version, and a kind served by two groups as one stored kind
		// (events) once too.
		{"one kind many times", objectsOf("v1 ConfigMap", "v1 ConfigMap", "apps/v1 Deployment", "apps/v1beta1 Deployment"), 1, 2},
		{"events in two groups", objectsOf("v1 Event", "events.k8s.io/v1 Event"), 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oe := checkManifestKinds(tc.objs, tc.limit)
			if tc.want == 0 {
				if oe != nil {
					t.Fatalf("refused: %v", oe)
				}
				return
			}
			if oe == nil || oe.Reason != v1alpha1.ReasonTooManyKinds || oe.Retry ||
				!strings.Contains(oe.Error(), fmt.Sprintf("names %d kinds, more than the %d", tc.want, tc.limit)) {
				t.Fatalf("got %v, want TooManyKinds naming %d kinds", oe, tc.want)
			}
		})
	}
}

func TestTooManyKindsNamesTheBoundItsNumberAndFlag(t *testing.T) {
	for _, tc := range []struct {
		err   error
		want  string
		retry bool
	}{
		{&watchregistry.InformerBudgetError{Scope: watchregistry.ScopeTenant, Name: "team-a", Limit: 64, Need: 70},
			"namespace team-a would have Vidra watch 70 kinds, more than the 64 a namespace may (--max-informers-per-namespace)", false},
		{fmt.Errorf("track: %w", &watchregistry.InformerBudgetError{Scope: watchregistry.ScopeCluster, Name: "c", Limit: 256, Need: 257}),
			"would need 257 informers, one per kind watched, more than the 256 Vidra runs for one cluster (--max-informers-per-cluster)", true},
		{&watchregistry.InformerBudgetError{Scope: watchregistry.ScopeTotal, Limit: 1024, Need: 1025},
			"more than the 1024 it runs in all (--max-informers)", true},
	} {
		oe := tooManyKinds(tc.err)
		if oe == nil || oe.Reason != v1alpha1.ReasonTooManyKinds || oe.Retry != tc.retry || !strings.Contains(oe.Error(), tc.want) {
			t.Errorf("tooManyKinds(%v) = %v, want TooManyKinds (retry %v) saying %q", tc.err, oe, tc.retry, tc.want)
		}
	}
	if oe := tooManyKinds(errors.New("unknown cluster")); oe != nil {
		t.Errorf("another error of Track became %v", oe)
	}
}

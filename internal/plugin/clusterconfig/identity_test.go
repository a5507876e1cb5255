// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterconfig

import (
	"errors"
	"strings"
	"testing"
)

func TestDecideRefusesAnIdentityThatCanDoMoreThanADestinationNeeds(t *testing.T) {
	allow := func(checks ...Check) map[Check]bool {
		m := map[Check]bool{}
		for _, c := range checks {
			m[c] = true
		}
		return m
	}
	scoped := &Identity{User: "system:serviceaccount:vidra-remote:vidra", Groups: []string{"system:serviceaccounts", "system:authenticated"}, Allowed: allow()}
	tests := []struct {
		name      string
		id        *Identity
		reviewErr error
		yes       bool
		// refused and warned are what the error and the warning must
		// hold; nil for none.
		refused, warned []string
	}{
		{name: "a scoped ServiceAccount", id: scoped},
		{name: "system:masters", id: &Identity{User: "admin", Groups: []string{"system:masters", "system:authenticated"}, Allowed: allow(powers[0].Check)},
			refused: []string{`user "admin", groups system:masters`, "is in group system:masters", "cluster-admin", "namespace team-a", "the edit role", "create token", "--yes"}},
		{name: "cluster-admin by binding", id: &Identity{User: "ops", Allowed: allow(powers[0].Check, powers[1].Check, powers[2].Check, powers[3].Check, powers[4].Check)},
			refused: []string{"cluster-admin", "escalate clusterroles", "bind clusterroles", "impersonate users", "impersonate groups"}},
		{name: "escalate alone", id: &Identity{Allowed: allow(Check{"escalate", "rbac.authorization.k8s.io", "clusterroles"})}, refused: []string{`the identity of context "prod" can do more`, "escalate clusterroles"}},
		{name: "bind alone", id: &Identity{Allowed: allow(Check{"bind", "rbac.authorization.k8s.io", "clusterroles"})}, refused: []string{"bind clusterroles"}},
		{name: "impersonate users", id: &Identity{Allowed: allow(Check{"impersonate", "", "users"})}, refused: []string{"impersonate users"}},
		{name: "impersonate groups", id: &Identity{Allowed: allow(Check{"impersonate", "", "groups"})}, refused: []string{"impersonate groups"}},
		{name: "a risk with --yes", id: &Identity{Groups: []string{"system:masters"}, Allowed: allow()}, yes: true, warned: []string{"is in group system:masters", "--yes"}},
		{name: "the review failed", reviewErr: errors.New("connection refused"), refused: []string{"could not check", "connection refused", "--yes"}},
		{name: "the review failed, --yes", reviewErr: errors.New("connection refused"), yes: true, warned: []string{"could not check", "connection refused"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide("prod", "team-a", tc.id, tc.reviewErr, tc.yes)
			if (d.Refused != nil) != (tc.refused != nil) {
				t.Fatalf("refused: %v, want refused %v", d.Refused, tc.refused != nil)
			}
			if (d.Warning != "") != (tc.warned != nil) {
				t.Fatalf("warning: %q, want one %v", d.Warning, tc.warned != nil)
			}
			for _, w := range tc.refused {
				if !strings.Contains(d.Refused.Error(), w) {
					t.Errorf("the refusal lacks %q:\n%s", w, d.Refused)
				}
			}
			for _, w := range tc.warned {
				if !strings.Contains(d.Warning, w) {
					t.Errorf("the warning lacks %q:\n%s", w, d.Warning)
				}
			}
		})
	}
}

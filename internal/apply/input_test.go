// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"errors"
	"testing"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/fakeapply"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// A destination the caller could not resolve fails the pass before any
// request: the current one with its reason, a previous one the inventory
// is still on with DestinationError, the inventory kept on that cluster
// (Behind) to be let go at the next try.
func TestADestinationThatCannotBeResolvedFailsThePassBeforeAnyRequest(t *testing.T) {
	unreachable := errors.New("dial tcp 192.0.2.1:6443: connect: connection refused")
	for _, tc := range []struct {
		name       string
		in         func(vr *v1alpha1.VidraResource, f *engineFixture) Input
		wantBehind bool
	}{
		{"the destination", func(vr *v1alpha1.VidraResource, _ *engineFixture) Input {
			return Input{VR: vr, TargetErr: unreachable}
		}, false},
		{"the previous destination", func(vr *v1alpha1.VidraResource, f *engineFixture) Input {
			return Input{VR: vr, Target: f.target, Previous: &Previous{VR: vr, Err: unreachable}}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vr := engineVR("app", appManifest, inSyncStatus)
			f := newEngineFixture(t, []*v1alpha1.VidraResource{vr})
			pass := f.engine.Apply(context.Background(), tc.in(vr, f))
			if len(pass.Out.Errs) != 1 || !pass.Out.Errs[0].Retry || !errors.Is(pass.Out.Errs[0], unreachable) {
				t.Errorf("errors %v, want the resolve's error, retried", pass.Out.Errs)
			}
			if pass.Out.Behind != tc.wantBehind || len(pass.Out.Inventory) != 1 {
				t.Errorf("behind %v with inventory %v, want %v with the inventory kept", pass.Out.Behind, pass.Out.Inventory, tc.wantBehind)
			}
			if reqs := f.requests(); len(reqs) != 0 {
				t.Errorf("requests %v, want none", reqs)
			}
		})
	}
}

// The target is resolved once the objects on the previous destination
// are let go, never before: the resolver keeps state per resource, and
// resolving the new destination releases the previous cluster's clients
// and watches. A previous destination that cannot be let go stops the
// pass before the target is resolved at all.
func TestTheTargetIsResolvedAfterThePreviousDestinationIsLeft(t *testing.T) {
	for _, tc := range []struct {
		name         string
		leaveErr     error
		wantResolved bool
	}{
		{"let go", nil, true},
		{"not let go", errors.New("connection refused"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vr := engineVR("app", appManifest, inSyncStatus)
			f := newEngineFixture(t, []*v1alpha1.VidraResource{vr}, fakeapply.AppConfigMap(engineNS, vr))
			resolved, requestsBefore := 0, -1
			in := Input{VR: vr, Previous: &Previous{VR: vr, Target: f.target, Err: tc.leaveErr},
				Resolve: func(context.Context) (*destination.Target, error) {
					resolved++
					requestsBefore = len(f.requests())
					return f.target, nil
				}}
			pass := f.engine.Apply(context.Background(), in)
			if got := resolved == 1; got != tc.wantResolved || resolved > 1 {
				t.Fatalf("resolved %d times, want resolved: %v (errors %v)", resolved, tc.wantResolved, pass.Out.Errs)
			}
			if tc.wantResolved && requestsBefore == 0 {
				t.Errorf("resolved before the previous destination was let go: no request before it; all: %v", f.requests())
			}
		})
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"errors"
	"testing"

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

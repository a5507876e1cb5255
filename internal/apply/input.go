// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// Input is what a reconcile gives one pass of the engine: the resource,
// where its objects go, and, when spec.destination moved, where its
// inventory is. The caller resolves the destinations; what comes of them
// (a failure, a left-behind inventory) is the engine's to say in the
// pass's Out.
type Input struct {
	VR *v1alpha1.VidraResource
	// OverrideManagers are the field managers whose edits are taken back
	// (config overrideManagers).
	OverrideManagers []string
	// Target is where the objects go; TargetErr, when it could not be
	// resolved, why.
	Target    *destination.Target
	TargetErr error
	// Resolve, when set, resolves Target and TargetErr once the objects on
	// a previous destination have been let go. The resolver keeps state per
	// resource: resolving the new destination first would release the
	// previous cluster's clients and watches while the pass still needs
	// them to let its objects go.
	Resolve func(context.Context) (*destination.Target, error)
	// Previous is set when spec.destination moved away from the cluster
	// the inventory is on: the objects there are let go first.
	Previous *Previous
}

// Previous is the cluster an inventory is on after spec.destination moved.
type Previous struct {
	// VR is the resource aimed at that cluster.
	VR *v1alpha1.VidraResource
	// Target is that cluster; Err, when it could not be resolved, why.
	Target *destination.Target
	Err    error
}

// Apply runs one pass of in.VR and returns it: its Out says what it did,
// for the caller's status write, and Finish completes it. The objects on a
// previous destination are let go first (leavePrevious); a destination
// that could not be resolved fails the pass before any request.
func (e *Engine) Apply(ctx context.Context, in Input) *Pass {
	pass := e.NewPass(in.VR, in.OverrideManagers)
	if in.Previous != nil && !e.leavePrevious(ctx, pass, *in.Previous) {
		return pass
	}
	if in.Resolve != nil {
		in.Target, in.TargetErr = in.Resolve(ctx)
	}
	if in.TargetErr != nil {
		reason, retry := destination.Failure(in.TargetErr)
		pass.Out.Fail(reason, retry, destination.Readable(in.TargetErr))
		return pass
	}
	pass.Target = in.Target
	e.applyPass(ctx, pass)
	return pass
}

// leavePrevious prunes (or, with prune false, releases) the inventory on
// the cluster it is on when spec.destination has moved to another, so that
// the objects there are not forgotten. Objects it cannot settle stay in the
// inventory, with their cluster, and the pass stops there, to be retried
// with backoff: it returns false. When the previous cluster's kubeconfig
// Secret is gone, nothing can reach its objects again: they are left
// behind with a Warning Event.
func (e *Engine) leavePrevious(ctx context.Context, pass *Pass, prev Previous) bool {
	switch {
	case prev.Err != nil && destination.IsSecretGone(prev.Err):
		e.events.Event(pass.VR, true, "LeftBehind", "The destination moved and the previous one cannot be reached any more (%v); left behind there: %s",
			prev.Err, wording.Message(InventoryNames(pass.Inventory)))
		pass.Inventory, pass.Out.Inventory = nil, nil
		return true
	case prev.Err != nil:
		pass.Out.Behind = true
		pass.Out.Fail(v1alpha1.ReasonDestinationError, true,
			fmt.Errorf("spec.destination moved; the objects on the previous destination are cleaned up first, which failed (retrying): %w", destination.Readable(prev.Err)))
		return false
	}
	n := len(pass.Inventory)
	if !e.Leave(ctx, pass, prev.VR, prev.Target) {
		pass.Out.Behind = true
		return false
	}
	klog.FromContext(ctx).Info("Left the previous destination", "previousServer", prev.VR.Spec.Destination.Server, "objects", n)
	return true
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package preview

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/plugin/render"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// How the engine's decisions read in a preview. The preview decides
// nothing: each action of apply.Plan is one of the preview's, and a write
// is shown as the API server's dry run of it.

// isWrite reports the engine's actions that apply the manifest's object
// over a live one: a change.
func isWrite(a apply.Action) bool {
	switch a {
	case apply.PlanApply, apply.PlanMarksOnly, apply.PlanTakeBack, apply.PlanTakeOver, apply.PlanRemoveKeys:
		return true
	}
	return false
}

// render previews decision d.
func (r *reader) render(ctx context.Context, d apply.Decision) Object {
	out := objectOf(d.Object, ActionError)
	switch {
	case d.Action == apply.PlanIgnore:
		out.Action, out.Message = ActionIgnore, d.Reason
	case d.Err != nil && d.Action == apply.PlanFail:
		out.Message = d.Err.Err.Error()
	case d.Err != nil:
		// Conflict, Refuse: the operator writes nothing.
		out.Action, out.Message = ActionConflict, d.Err.Err.Error()
	case d.Action == apply.PlanInSync:
		out.Action = ActionUnchanged
	case d.Action == apply.PlanCreateOnly:
		out.Action, out.Message = ActionUnchanged, "exists; "+v1alpha1.ApplyPolicyAnnotation+": IfNotPresent never changes it"
	case d.Action == apply.PlanCreate:
		return r.created(ctx, out, d.Object)
	case d.Action == apply.PlanReportDrift:
		out = r.written(ctx, out, d)
		if out.Action != ActionError {
			out.Action = ActionUnchanged
			out.Message = "drifted (" + d.Reason + "); driftPolicy Report lists it in status.drift and changes nothing"
		}
	case d.Action == apply.PlanRecreate:
		out.Action, out.Message = ActionChange, "made immutable by another writer; force deletes it and creates it again"
		out = withDiff(out, d.Live, d.Object)
	case isWrite(d.Action):
		out = r.written(ctx, out, d)
	default:
		return r.leaving(out, d)
	}
	return out
}

// written previews the apply of d's object over the live one as the API
// server's dry run answers it.
func (r *reader) written(ctx context.Context, out Object, d apply.Decision) Object {
	a := r.dryRun(ctx, d.Object, d.Live)
	if a.err != nil {
		out.Message = a.err.Error()
		return out
	}
	out.Action = ActionChange
	switch {
	case d.Adopts != "":
		out.Message = "adopts it from " + d.Adopts + ", which no longer exists (spec.adoptOrphans)"
	case d.Reason != "the manifest changed":
		out.Message = d.Reason
	}
	return withDiff(out, d.Live, a.after)
}

// created previews the creation of want, from the client side where the
// API server cannot be asked yet (its namespace or its CRD is created by
// the manifest first).
func (r *reader) created(ctx context.Context, out Object, want *unstructured.Unstructured) Object {
	out.Action = ActionCreate
	if _, err := mapping(r.c.Mapper, want.GroupVersionKind()); err != nil {
		out.Message = "not checked by the API server: its CustomResourceDefinition is created by this manifest first"
		return withDiff(out, nil, want)
	}
	a := r.dryRun(ctx, want, nil)
	switch {
	case errors.Is(a.err, errNamespaceFirst):
		out.Message = "not checked by the API server: namespace " + want.GetNamespace() + " is created by this manifest first"
		return withDiff(out, nil, want)
	case a.err != nil:
		out.Action, out.Message = ActionError, a.err.Error()
		return out
	}
	return withDiff(out, nil, a.after)
}

// leaving previews the decision on an object that left the manifest.
func (r *reader) leaving(out Object, d apply.Decision) Object {
	switch d.Action {
	case apply.PlanPrune:
		out.Action, out.Message = ActionPrune, "left the manifest"
		return withDiff(out, d.Live, nil)
	case apply.PlanRelease:
		out.Action, out.Message = ActionRelease, "left the manifest; spec.prune is false: kept, without Vidra's marks"
		return withDiff(out, d.Live, apply.Released(d.Live))
	case apply.PlanKeep:
		out.Action, out.Message = ActionRelease, "left the manifest; "+v1alpha1.PrunePolicyAnnotation+": disabled: kept, without Vidra's marks"
		return withDiff(out, d.Live, apply.Released(d.Live))
	case apply.PlanPruneRefused:
		out.Action, out.Message = ActionKeep, "left the manifest; prune refuses to delete a Namespace or CRD (and all inside it) unless spec.pruneNamespacesAndCRDs is true"
	case apply.PlanHold:
		out.Action = ActionHeld
		out.Message = fmt.Sprintf("left the manifest, but an object of the same kind and name fails (%s), which may be this one moved: it stays as it is until that object applies", d.Holder)
	case apply.PlanHandOver:
		out.Action = ActionHandOver
		out.Message = "left the manifest; VidraResource " + d.Heir + " declares it too: handed over to it, marks rewritten (the operator first checks that its identity may manage it)"
	default:
		out.Message = "the engine decided " + string(d.Action) + ": " + d.Reason
	}
	return out
}

func objectOf(u *unstructured.Unstructured, a Action) Object {
	return Object{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Action: a}
}

// withDiff sets out's diff: before against after, either nil for absent.
func withDiff(out Object, before, after *unstructured.Unstructured) Object {
	b, err := YAML(before)
	if err == nil {
		var a string
		if a, err = YAML(after); err == nil {
			out.Diff, err = UnifiedDiff(b, a, label("live", out), label("vidra", out))
		}
	}
	if err != nil {
		out.Action, out.Message = ActionError, err.Error()
	}
	return out
}

// label names one side of a diff, as kubectl diff names its directories.
// The names are the objects', which the API server does not always check
// (those of RBAC objects may hold control characters): the label is Safe.
func label(side string, o Object) string {
	ns := o.Namespace
	if ns == "" {
		ns = "-"
	}
	return render.Safe(fmt.Sprintf("%s/%s.%s.%s.%s", side, o.APIVersion, o.Kind, ns, o.Name))
}

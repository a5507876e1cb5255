// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"bytes"
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// A ConfigMap or Secret made immutable can never be changed again, only
// deleted. Whoever may patch one object Vidra manages could otherwise
// freeze it: every later change of its data fails, and the object stays as
// that writer left it. So `immutable: true` set by anyone but Vidra, on an
// object whose manifest does not ask it, is drift: under the resource's
// force policy (spec.force, or the object's force annotation) the object is
// recreated from the manifest; without it the object fails with
// ImmutableSet, naming the field manager that set the flag; under
// driftPolicy Report it is listed as drift.

// immutablePath is the field of ConfigMaps and Secrets that freezes them.
var immutablePath = fieldpath.MakePathOrDie("immutable")

// immutableDrift reports whether live, a core ConfigMap or Secret, is
// immutable while desired, its manifest's object, does not ask it.
func immutableDrift(desired, live *unstructured.Unstructured) bool {
	gvk := desired.GroupVersionKind()
	if gvk.Group != "" || (gvk.Kind != "ConfigMap" && gvk.Kind != "Secret") || live == nil {
		return false
	}
	frozen, _, _ := unstructured.NestedBool(live.Object, "immutable")
	asked, _, _ := unstructured.NestedBool(desired.Object, "immutable")
	return frozen && !asked
}

// immutableManager returns the field manager that owns the immutable field
// in managedFields, and whether one does.
func immutableManager(managedFields []metav1.ManagedFieldsEntry) (string, bool) {
	for _, e := range managedFields {
		if e.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
			continue
		}
		if set.Has(immutablePath) {
			return e.Manager, true
		}
	}
	return "", false
}

// immutableSet handles an object that someone other than Vidra made
// immutable (immutableDrift of the cached live): it reads the object whole,
// since the cache keeps no other writer's fields, and recreates, reports or
// fails it. handled is false when the flag turns out to be Vidra's own
// (an earlier manifest asked it: the apply fails ImmutableField as for any
// immutable change) or gone: the caller goes on as usual.
func (e *Engine) immutableSet(ctx context.Context, pass *Pass, p *planned, hash uint64) (oerr *ObjectError, handled bool) {
	full, _, err := e.getLive(ctx, pass, p)
	if err != nil {
		return classify(p, fmt.Errorf("read: %w", err)), true
	}
	if full == nil || !immutableDrift(p.obj, full) {
		return nil, false
	}
	who, named := immutableManager(full.GetManagedFields())
	if named && isVidraManager(who) {
		return nil, false
	}
	// The manager is what the writer's client chose, cut and made
	// readable as drift records quote it.
	d := driftOf(p, full, handEdits{fields: &fieldpath.Set{}}, e.clock.Now())
	d.Fields, d.Manager = []string{"/immutable"}, boundedManager(who)
	writer := "a writer its managedFields do not name"
	if named {
		writer = "field manager " + d.Manager
	}
	switch {
	case pass.report:
		e.reportDrift(pass, p, d)
		p.applied = true
		p.observe(full, 0)
		return nil, true
	case pass.VR.Spec.Force || p.policy.force:
		klog.FromContext(ctx).Info("Recreating object made immutable by another writer (force)", "object", p.key.String(), "manager", d.Manager)
		e.event(pass.VR, true, v1alpha1.ReasonImmutableSet, "%s was made immutable by %s, which the manifest does not ask: recreated (force)", p.key, writer)
		if err := e.recreate(ctx, pass, p, full); err != nil {
			return classify(p, err), true
		}
		pass.Out.Recreated++
		p.unchanged, p.drift = true, &d
		found, oerr := e.applyAbsent(ctx, pass, p, hash)
		if found != nil {
			return classify(p, fmt.Errorf("created again by another writer while Vidra recreated it, retrying")), true
		}
		return oerr, true
	}
	return &ObjectError{Key: p.key, Index: p.index, Reason: v1alpha1.ReasonImmutableSet, Err: fmt.Errorf(
		"made immutable (immutable: true) by %s, which the manifest does not ask: its data can no longer be changed. "+
			"Set spec.force or the annotation %s: enabled to let Vidra recreate it, delete it (Vidra creates it again), or add immutable: true to the manifest",
		writer, v1alpha1.ForcePolicyAnnotation)}, true
}

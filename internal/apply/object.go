// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/destination"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// syncObject brings one object to its desired state: it gathers what is
// known of it, decides (decide.go), and executes the decision. It makes no
// request when the cached live object already matches.
func (e *Engine) syncObject(ctx context.Context, pass *Pass, p *planned) *ObjectError {
	in, oerr := e.gather(ctx, pass, p)
	if oerr != nil {
		return oerr
	}
	// Each action that does not end the object's turn learns what keeps it
	// from being chosen again (actRead sets fresh, actReadWhole wholeRead,
	// a creation that finds the object sets live), so the loop ends.
	for {
		if done, oerr := e.execute(ctx, pass, p, in, decide(p, in)); done {
			return oerr
		}
	}
}

// gather collects the evidence decide reads of p: the live object as the
// cache (or, where it cannot tell, the API server) shows it, the engine's
// record of its last apply, and, for a live object, the owner check.
func (e *Engine) gather(ctx context.Context, pass *Pass, p *planned) (*evidence, *ObjectError) {
	live, _, err := e.readLive(ctx, pass, p)
	if err != nil {
		return nil, classify(p, fmt.Errorf("read: %w", err))
	}
	rec, known := pass.st.applied[p.key]
	in := newEvidence(p, pass.VR, rec, known, e.clock.Now())
	in.unmanaged, in.report = pass.st.unmanaged[p.key], pass.report
	p.unchanged = in.unchanged
	if live == nil {
		return in, nil
	}
	return in, e.see(ctx, pass, p, in, live)
}

// see makes live the object in describes, with the owner check's verdict
// and, when the object is this resource's to write, its hand edits. A
// verdict against writing it is decide's to act on; a lookup that failed
// fails the object.
func (e *Engine) see(ctx context.Context, pass *Pass, p *planned, in *evidence, live *unstructured.Unstructured) *ObjectError {
	in.live = live
	if oe := e.checkOwner(ctx, pass, live, p); oe != nil {
		if !oe.Conflict {
			return oe
		}
		in.owner = oe
		return nil
	}
	in.hand = parseHandEdits(live.GetManagedFields(), pass.overrides, p.notIgnored)
	return nil
}

// execute performs a, and reports whether p's turn is done: it is not after
// a read, whose answer the next decision reads.
func (e *Engine) execute(ctx context.Context, pass *Pass, p *planned, in *evidence, a action) (done bool, oerr *ObjectError) {
	switch a.kind {
	case actRead:
		oerr := e.readAgain(ctx, pass, p, in)
		return oerr != nil, oerr
	case actReadWhole:
		full, _, err := e.getLive(ctx, pass, p)
		if err != nil {
			return true, classify(p, fmt.Errorf("read: %w", err))
		}
		in.whole, in.wholeRead = full, true
		return false, nil
	case actCreate:
		found, oerr := e.applyAbsent(ctx, pass, p, in.hash)
		if found == nil {
			return true, oerr
		}
		// The object exists after all, Vidra's own behind a cache that has
		// not caught up (applyAbsent checked its owner): decided again as
		// any live object.
		in.live, in.fresh = found, true
		in.hand = parseHandEdits(found.GetManagedFields(), pass.overrides, p.notIgnored)
		return false, nil
	case actConflict, actRefuse:
		return true, a.err
	case actInSync, actCreateOnly:
		e.settle(pass, p, result{live: in.live, rv: in.live.GetResourceVersion(), hash: in.hash})
		return true, nil
	case actReportDrift:
		e.settle(pass, p, result{reported: true, live: a.object, drift: a.drift})
		return true, nil
	case actRecreate:
		return true, e.recreateImmutable(ctx, pass, p, in, a)
	}
	return true, e.write(ctx, pass, p, in, a)
}

// readAgain reads p's object from the API server into in.
func (e *Engine) readAgain(ctx context.Context, pass *Pass, p *planned, in *evidence) *ObjectError {
	live, _, err := e.getLive(ctx, pass, p)
	if err != nil {
		return classify(p, fmt.Errorf("read: %w", err))
	}
	in.fresh = true
	if live == nil {
		// Gone, and with it what was known of it unmarked.
		delete(pass.st.unmanaged, p.key)
		in.unmanaged = false
		return nil
	}
	return e.see(ctx, pass, p, in, live)
}

// write applies p over the live object, after taking back or removing what
// hand edits added where a says so.
func (e *Engine) write(ctx context.Context, pass *Pass, p *planned, in *evidence, a action) *ObjectError {
	live := in.live
	p.marks, p.drift = a.marks, a.drift
	if len(a.managers) > 0 {
		klog.FromContext(ctx).V(2).Info("Taking back a hand edit", "object", p.key.String(), "managers", a.managers)
	}
	switch a.kind {
	case actRemoveKeys:
		resp, err := e.removeKeys(ctx, pass, p, live, a.keys)
		if err == nil && isSubset(p.obj.Object, resp.Object) {
			e.settle(pass, p, result{live: live, rv: resp.GetResourceVersion(), generation: resp.GetGeneration(), hash: in.hash})
			return nil
		}
		if err == nil {
			live = resp
		}
		// A concurrent write, or more to restore: the general path.
		fallthrough
	case actTakeOver:
		if err := e.takeOver(ctx, pass, p, live); err != nil {
			return classify(p, fmt.Errorf("take back fields of %s: %w", strings.Join(a.managers, ", "), err))
		}
	}
	return e.applyOver(ctx, pass, p, live, in.hash)
}

// applyOver server-side applies p over live, recreating the object when an
// immutable field changed and force allows it, and settles the result.
func (e *Engine) applyOver(ctx context.Context, pass *Pass, p *planned, live *unstructured.Unstructured, hash uint64) *ObjectError {
	resp, err := e.applyMeta(ctx, pass, p, live)
	if err != nil && isImmutable(err) && (pass.VR.Spec.Force || p.policy.force) && live != nil {
		if oerr := e.recreateChanged(ctx, pass, p, live, err); oerr != nil {
			return oerr
		}
		// From here on it is a creation, and counted as one.
		live = nil
		resp, err = e.applyMeta(ctx, pass, p, nil)
	}
	if err != nil {
		e.metrics.Applies.WithLabelValues("error").Inc()
		if isReplaced(err) {
			// Deleted, or replaced by someone else, since it was read: the
			// retry reads it again.
			return classify(p, fmt.Errorf("changed while Vidra applied it, retrying: %w", err))
		}
		return classify(p, err)
	}
	e.metrics.Applies.WithLabelValues("success").Inc()
	e.settle(pass, p, result{live: live, rv: resp.ResourceVersion, generation: resp.Generation, hash: hash})
	return nil
}

// recreateChanged deletes live so that the apply that follows creates it
// with the immutable fields the apply could not change (err), under
// spec.force or the object's force policy.
func (e *Engine) recreateChanged(ctx context.Context, pass *Pass, p *planned, live *unstructured.Unstructured, err error) *ObjectError {
	if deleteRefused(pass.VR, p.key) {
		// Deleting a CRD deletes every custom resource of its kind,
		// in every namespace and whoever declared them; deleting a
		// Namespace, everything in it. Force recreates such an object
		// only where a prune may delete it.
		held := "every custom resource of its kind"
		if p.key.kind == "Namespace" {
			held = "everything in it"
		}
		e.metrics.Applies.WithLabelValues("error").Inc()
		return &ObjectError{Key: p.key, Index: p.index, Reason: v1alpha1.ReasonImmutableField, Err: fmt.Errorf(
			"%w (spec.force does not recreate a %s, which would delete %s, unless spec.pruneNamespacesAndCRDs is true)",
			err, p.key.kind, held)}
	}
	klog.FromContext(ctx).Info("Recreating object to change an immutable field (spec.force)", "object", p.key.String())
	if err := e.recreate(ctx, pass, p, live); err != nil {
		return classify(p, err)
	}
	pass.Out.Recreated++
	return nil
}

// recreateImmutable deletes an object another writer made immutable
// (actRecreate) and creates it from the manifest, as the correction of
// a.drift.
func (e *Engine) recreateImmutable(ctx context.Context, pass *Pass, p *planned, in *evidence, a action) *ObjectError {
	klog.FromContext(ctx).Info("Recreating object made immutable by another writer (force)", "object", p.key.String(), "manager", a.drift.Manager)
	e.events.Event(pass.VR, true, v1alpha1.ReasonImmutableSet, "%s was made immutable by %s, which the manifest does not ask: recreated (force)", p.key, a.writer)
	if err := e.recreate(ctx, pass, p, a.object); err != nil {
		return classify(p, err)
	}
	pass.Out.Recreated++
	p.unchanged, p.drift = true, a.drift
	found, oerr := e.applyAbsent(ctx, pass, p, in.hash)
	if found != nil {
		return classify(p, fmt.Errorf("created again by another writer while Vidra recreated it, retrying"))
	}
	return oerr
}

// applyAbsent creates an object that no cache or read has shown, in one
// request: a server-side apply that can only create (see applyMeta), so a
// pre-existing object of that name, someone else's above all, makes it fail
// with a conflict and is not changed at all. The apply being Vidra's, the
// created object's fields are owned by Vidra's Apply entry exactly as if a
// plain apply had created it. found is the object that turned out to exist
// and be Vidra's, to go on with; it is nil when the object was created, or
// on an error.
func (e *Engine) applyAbsent(ctx context.Context, pass *Pass, p *planned, hash uint64) (found *unstructured.Unstructured, oerr *ObjectError) {
	resp, err := e.applyMeta(ctx, pass, p, nil)
	switch {
	case apierrors.IsConflict(err):
		live, _, gerr := e.getLive(ctx, pass, p)
		if gerr != nil {
			return nil, classify(p, fmt.Errorf("read: %w", gerr))
		}
		if live == nil {
			return nil, classify(p, fmt.Errorf("deleted while Vidra created it, retrying: %w", err))
		}
		if oerr := e.checkOwner(ctx, pass, live, p); oerr != nil {
			return nil, oerr
		}
		return live, nil
	case err != nil:
		e.metrics.Applies.WithLabelValues("error").Inc()
		return nil, classify(p, err)
	}
	e.metrics.Applies.WithLabelValues("success").Inc()
	e.settle(pass, p, result{rv: resp.ResourceVersion, generation: resp.Generation, hash: hash})
	return nil, nil
}

// createOnlyVersion is a resourceVersion no object ever has. In an apply it
// is a precondition that only a creation meets: the API server ignores
// metadata.resourceVersion when an apply creates the object, and refuses
// the apply with a conflict when an object exists, whatever its version.
const createOnlyVersion = "9223372036854775807"

// applyMeta server-side applies p and reads back only the metadata of the
// result: what Vidra keeps of an apply is its resourceVersion. The apply is
// guarded so that it never writes to an object Vidra has not read: with
// live nil it can only create (createOnlyVersion), else it can only change
// the object of live's UID, and fails if that object was deleted or
// replaced since. Neither guard costs a request, and the API server tracks
// neither field in managedFields.
func (e *Engine) applyMeta(ctx context.Context, pass *Pass, p *planned, live *unstructured.Unstructured) (*metav1.PartialObjectMetadata, error) {
	obj, fromLive := p.withIgnored(live)
	md, _ := obj["metadata"].(map[string]any)
	md = maps.Clone(md)
	if md == nil {
		md = map[string]any{}
	}
	switch {
	case live == nil:
		md["resourceVersion"] = createOnlyVersion
	case fromLive:
		// The ignored fields carry live's values, which a write since
		// would make stale: apply at live's version only.
		md["uid"] = string(live.GetUID())
		md["resourceVersion"] = live.GetResourceVersion()
	default:
		md["uid"] = string(live.GetUID())
	}
	if p.adoptVersion != "" && !fromLive {
		// fromLive's version is live's: older than the adoption's read, the
		// apply fails and the retry reads both again.
		md["resourceVersion"] = p.adoptVersion
	}
	obj["metadata"] = md
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", p.key, err)
	}
	force := live != nil
	opts := metav1.PatchOptions{FieldManager: v1alpha1.FieldManager, Force: &force}
	if pass.Target.Cluster != destination.LocalCluster {
		// What is sent carries spec.ignore's seeds or live values, which
		// the manifest's object does not.
		ctx = destination.AnswersAbout(ctx, p.obj, int64(len(body)))
	}
	w := e.beginWrite(pass, p)
	if live == nil {
		// A creation answers with the whole object, defaults included:
		// its health is judged on it, as it will be on the cached object
		// later, not on the manifest's object, which lacks the defaults
		// some kinds' health reads (a Deployment's progress deadline).
		created, err := pass.Target.Client.Resource(p.gvr).Namespace(p.obj.GetNamespace()).Patch(ctx, p.obj.GetName(), types.ApplyPatchType, body, opts)
		w.End(created, err)
		if err != nil {
			return nil, err
		}
		p.created = created
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: created.GetName(), Namespace: created.GetNamespace(),
			ResourceVersion: created.GetResourceVersion(), Generation: created.GetGeneration(), UID: created.GetUID()}}, nil
	}
	resp, err := pass.Target.Meta.Resource(p.gvr).Namespace(p.obj.GetNamespace()).Patch(ctx, p.obj.GetName(), types.ApplyPatchType, body, opts)
	w.End(resp, err)
	return resp, err
}

// beginWrite declares to the registry a write of p about to be sent, so
// that its watch event, which may arrive before the write's answer, does not
// wake the resource that made it. The caller ends the write with its
// answer or error.
func (e *Engine) beginWrite(pass *Pass, p *planned) *watchregistry.Write {
	return e.registry.BeginWrite(watchregistry.Ref{Cluster: pass.Target.Cluster, GVR: p.gvr}, p.obj)
}

// takeOver hands the fields of hand-edit managers to Vidra (see
// managedFieldsTakenOver), guarded by the resourceVersion it read, so that a
// concurrent write makes it fail and retry rather than lose that write.
func (e *Engine) takeOver(ctx context.Context, pass *Pass, p *planned, cached *unstructured.Unstructured) error {
	client := pass.Target.Client.Resource(p.gvr).Namespace(p.obj.GetNamespace())
	// The cache trims status writers' entries; managedFields are written
	// whole, so read them whole.
	live, err := client.Get(ctx, p.obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	entries, ok := managedFieldsTakenOver(live.GetManagedFields(), pass.overrides, p.notIgnored, v1alpha1.FieldManager, live.GetAPIVersion(), metav1.NewTime(e.clock.Now()))
	if !ok {
		return nil
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()},
		{"op": "replace", "path": "/metadata/managedFields", "value": entries},
	})
	if err != nil {
		return err
	}
	w := e.beginWrite(pass, p)
	resp, err := client.Patch(ctx, p.obj.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.DriftFieldManager})
	w.End(resp, err)
	return err
}

// removeKeys deletes labels and annotations added by hand with one JSON
// patch, guarded by the resourceVersion they were seen at, so that it fails
// rather than act on a version it has not seen.
func (e *Engine) removeKeys(ctx context.Context, pass *Pass, p *planned, live *unstructured.Unstructured, paths [][]string) (*unstructured.Unstructured, error) {
	ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()}}
	for _, path := range paths {
		ops = append(ops, map[string]any{"op": "remove", "path": "/" + strings.Join(escapePointer(path), "/")})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	w := e.beginWrite(pass, p)
	resp, err := pass.Target.Client.Resource(p.gvr).Namespace(p.obj.GetNamespace()).Patch(ctx, p.obj.GetName(), types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: v1alpha1.DriftFieldManager})
	w.End(resp, err)
	return resp, err
}

// escapePointer escapes path segments for a JSON pointer (RFC 6901): label
// keys often hold a "/".
func escapePointer(path []string) []string {
	out := make([]string, len(path))
	for i, seg := range path {
		out[i] = strings.ReplaceAll(strings.ReplaceAll(seg, "~", "~0"), "/", "~1")
	}
	return out
}

// recreate deletes the object and waits until it is gone, so that the apply
// that follows creates it with the new immutable fields.
func (e *Engine) recreate(ctx context.Context, pass *Pass, p *planned, live *unstructured.Unstructured) error {
	client := pass.Target.Client.Resource(p.gvr).Namespace(p.obj.GetNamespace())
	e.registry.ExpectDelete(watchregistry.Ref{Cluster: pass.Target.Cluster, GVR: p.gvr}, live)
	// The version whose marks checkOwner read: one handed over or changed
	// since is a conflict, and the retry looks again.
	uid, rv := live.GetUID(), live.GetResourceVersion()
	bg := metav1.DeletePropagationBackground
	err := client.Delete(ctx, p.obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if err != nil && !apierrors.IsNotFound(err) {
		e.registry.UnexpectDelete(watchregistry.Ref{Cluster: pass.Target.Cluster, GVR: p.gvr}, live)
		return fmt.Errorf("delete to recreate: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := client.Get(ctx, p.obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && got.GetUID() != uid, nil
	})
}

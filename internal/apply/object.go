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
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/health"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// applyObject brings one object to its desired state. It makes no request
// when the cached live object already matches: either it is the very version
// Vidra last applied, or every field the manifest sets has its value and no
// hand edit owns a field.
func (e *Engine) applyObject(ctx context.Context, pass *Pass, p *planned) *ObjectError {
	logger := klog.FromContext(ctx).WithValues("object", p.key.String())
	fail := func(err error) *ObjectError { return classify(p, err) }

	live, absent, err := e.readLive(ctx, pass, p)
	if err != nil {
		return fail(fmt.Errorf("read: %w", err))
	}
	hash := hashObject(p.obj)
	if absent && pass.st.unmanaged[p.key] {
		// Known to exist without Vidra's marks: one read tells whether it
		// is still there, where the create-only apply would fail and read.
		if live, _, err = e.getLive(ctx, pass, p); err != nil {
			return fail(fmt.Errorf("read: %w", err))
		}
		absent = live == nil
		if absent {
			delete(pass.st.unmanaged, p.key)
		}
	}
	rec, known := pass.st.applied[p.key]
	// unchanged: the manifest's object is the one Vidra last applied (or,
	// after a restart, the generation status describes: read from a cache
	// that may not show the last status write yet, so only then), so a
	// write would only undo someone else's change: drift.
	unchanged := known && rec.hash == hash
	if !known {
		unchanged = p.inventory && pass.VR.Generation == pass.VR.Status.ObservedGeneration
	}
	p.unchanged = unchanged
	if absent && pass.report && unchanged && p.inventory {
		// A cache can lag a creation; a deletion is reported only once a
		// read confirms it.
		if live, _, err = e.getLive(ctx, pass, p); err != nil {
			return fail(fmt.Errorf("read: %w", err))
		}
		if live == nil {
			e.reportDrift(pass, p, driftOf(p, nil, handEdits{}, e.clock.Now()))
			p.applied = true
			p.health, p.healthMessage = health.Of(nil)
			return nil
		}
		absent = false
	}
	if absent {
		found, oerr := e.applyAbsent(ctx, pass, p, hash)
		if found == nil {
			return oerr
		}
		// The object exists after all, Vidra's own behind a cache that has
		// not caught up: go on as for any live object.
		live = found
	} else if oerr := e.checkOwner(ctx, pass, live, p); oerr != nil {
		return oerr
	}
	if live != nil && p.policy.createOnly {
		// apply: IfNotPresent: created when missing, never changed
		// afterwards, whoever changes it.
		pass.st.applied[p.key] = appliedRecord{hash: hash, rv: live.GetResourceVersion()}
		delete(pass.st.reported, p.key)
		p.applied = true
		p.observe(live, 0)
		return nil
	}
	if immutableDrift(p.obj, live) {
		if oerr, handled := e.immutableSet(ctx, pass, p, hash); handled {
			return oerr
		}
	}
	if live != nil {
		hand := parseHandEdits(live.GetManagedFields(), pass.overrides, p.notIgnored)
		edits := hand.managers()
		inSync := len(edits) == 0 &&
			((known && rec.rv == live.GetResourceVersion() && rec.hash == hash) ||
				// Not after the manifest changed since Vidra's last apply: a
				// field it dropped is still in live, so live contains the new
				// object, and only an apply removes that field.
				(isSubset(p.obj.Object, live.Object) && (!known || rec.hash == hash)))
		if inSync {
			pass.st.applied[p.key] = appliedRecord{hash: hash, rv: live.GetResourceVersion()}
			delete(pass.st.reported, p.key)
			p.applied = true
			p.observe(live, 0)
			return nil
		}
		if unchanged {
			d := driftOf(p, live, hand, e.clock.Now())
			switch {
			case marksOnly(d):
				// Only Vidra's own marks are missing: an object an earlier
				// version applied, before it had them. Writing them is no
				// correction of anyone's change.
				p.marks = true
			case pass.report:
				// Fields that hold the manifest's values under another
				// manager (an edit undone by hand) are no drift to report.
				if len(d.Fields) > 0 {
					e.reportDrift(pass, p, d)
				} else {
					delete(pass.st.reported, p.key)
				}
				p.applied = true
				p.observe(live, 0)
				return nil
			default:
				p.drift = &d
			}
		}
		switch {
		case len(edits) > 0 && hand.coveredBy(p.obj.Object):
			// The forced apply below takes every hand-edited field back.
			logger.V(2).Info("Taking back a hand edit", "managers", edits)
		case len(edits) > 0:
			logger.V(2).Info("Taking back a hand edit", "managers", edits)
			if keys, ok := hand.addedMetadataKeys(p.obj.Object); ok {
				resp, err := e.removeKeys(ctx, pass, p, live, keys)
				if err == nil && isSubset(p.obj.Object, resp.Object) {
					e.applied(pass, p, live, resp.GetResourceVersion(), resp.GetGeneration(), hash)
					return nil
				}
				if err == nil {
					live = resp
				}
				// A concurrent write, or more to restore: the general path.
			}
			if err := e.takeOver(ctx, pass, p, live); err != nil {
				return fail(fmt.Errorf("take back fields of %s: %w", strings.Join(edits, ", "), err))
			}
		}
	}

	resp, err := e.applyMeta(ctx, pass, p, live)
	if err != nil && isImmutable(err) && (pass.VR.Spec.Force || p.policy.force) && live != nil {
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
		logger.Info("Recreating object to change an immutable field (spec.force)")
		if err := e.recreate(ctx, pass, p, live); err != nil {
			return fail(err)
		}
		// From here on it is a creation, and counted as one.
		live = nil
		pass.Out.Recreated++
		resp, err = e.applyMeta(ctx, pass, p, nil)
	}
	if err != nil {
		e.metrics.Applies.WithLabelValues("error").Inc()
		if isReplaced(err) {
			// Deleted, or replaced by someone else, since it was read: the
			// retry reads it again.
			return fail(fmt.Errorf("changed while Vidra applied it, retrying: %w", err))
		}
		return fail(err)
	}
	e.metrics.Applies.WithLabelValues("success").Inc()
	e.applied(pass, p, live, resp.ResourceVersion, resp.Generation, hash)
	return nil
}

// applied records a successful apply: the version and generation it
// produced, and whether it was a creation, a change, or drift. The write
// itself was declared to the registry when it was sent.
func (e *Engine) applied(pass *Pass, p *planned, live *unstructured.Unstructured, rv string, generation int64, hash uint64) {
	p.observe(live, generation)
	pass.st.applied[p.key] = appliedRecord{hash: hash, rv: rv}
	delete(pass.st.reported, p.key)
	p.applied = true
	if live != nil && rv == live.GetResourceVersion() {
		return
	}
	p.wrote = true
	pass.Out.Changed++
	if p.adoptedFrom != "" {
		e.event(pass.VR, false, v1alpha1.ReasonAdopted, "Adopted %s, left by %s, which no longer exists (spec.adoptOrphans)", p.key, p.adoptedFrom)
	}
	switch {
	case live == nil:
		pass.Out.Created++
	default:
		pass.Out.Configured++
	}
	// Drift: an object Vidra already manages, changed while the manifest
	// did not (p.unchanged), had to be written again.
	if p.unchanged && !p.marks {
		if live == nil {
			pass.Out.DriftDeleted++
		} else {
			pass.Out.DriftEdited++
		}
		d := p.drift
		if d == nil {
			r := driftOf(p, live, handEdits{fields: &fieldpath.Set{}}, e.clock.Now())
			d = &r
		}
		pass.Out.Drifted = append(pass.Out.Drifted, DescribeDrift(*d))
		kind := e.kinds.label(p.key.kind)
		e.metrics.DriftCorrections.WithLabelValues(kind).Inc()
		e.metrics.DriftDetected.WithLabelValues(kind, e.managers.label(d.Manager)).Inc()
		pass.st.remember(*d)
		if live != nil {
			pass.st.corrected(p.key, lastWriter(live), d.Fields, e.clock.Now())
		}
	}
}

// reportDrift lists p's drift under driftPolicy Report, and counts and
// announces it when it is new.
func (e *Engine) reportDrift(pass *Pass, p *planned, d v1alpha1.DriftRecord) {
	if pass.st.report(p.key, d) {
		pass.Out.NewDrift = append(pass.Out.NewDrift, DescribeDrift(d))
		e.metrics.DriftDetected.WithLabelValues(e.kinds.label(p.key.kind), e.managers.label(d.Manager)).Inc()
	}
}

// DescribeDrift says in a few words what changed and who changed it.
func DescribeDrift(d v1alpha1.DriftRecord) string {
	// The group, but for the core one's: one kind and name may be
	// served by two groups (Gateway).
	key := recordKey(d)
	if key.group != "" {
		key.kind += "." + key.group
	}
	switch {
	case d.Deleted:
		return key.String() + " (deleted)"
	case len(d.Fields) == 0 && d.Manager != "":
		// Values as the manifest says, fields held by a hand edit.
		return key.String() + " (fields taken back from " + d.Manager + ")"
	case len(d.Fields) == 0:
		return key.String() + " (edited)"
	}
	s := key.String() + " (" + strings.Join(d.Fields, ", ")
	if d.Manager != "" {
		s += " by " + d.Manager
	}
	return s + ")"
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
	e.applied(pass, p, nil, resp.ResourceVersion, resp.Generation, hash)
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
	obj := maps.Clone(p.obj.Object)
	fromLive := false
	if len(p.ig.seeds) > 0 {
		obj = p.obj.DeepCopy().Object
		fromLive = p.ig.withIgnored(obj, p.obj.Object, live)
	}
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

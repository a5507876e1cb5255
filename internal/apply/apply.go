package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// planned is one desired object, marked and mapped to its resource.
type planned struct {
	obj       *unstructured.Unstructured
	key       ObjectKey
	gvr       schema.GroupVersionResource
	index     int
	line      int
	inventory bool // listed in the inventory before this reconcile
	applied   bool // applied or found in sync in this reconcile
}

// readLive returns the live object: from the watch registry's cache when it
// holds it, else from the API server. absent is true when no object of that
// name exists that Vidra could read: either the API server said so, or a
// synced cache says no object with Vidra's label exists by that name, and
// the API server was not asked: only an unmanaged object could exist then,
// and the create-only apply of applyAbsent detects it without changing it.
func (e *Engine) readLive(ctx context.Context, pass *Pass, p *planned) (live *unstructured.Unstructured, absent bool, err error) {
	ref := watchregistry.Ref{Cluster: pass.Target.Cluster, GVR: p.gvr}
	u, err := e.registry.Get(ref, p.obj.GetNamespace(), p.obj.GetName())
	if err == nil && (pass.Target.ServiceAccount == "" || u.GetLabels()[v1alpha1.OwnerUIDLabel] == string(pass.VR.UID)) {
		return u, false, nil
	}
	if apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	return e.getLive(ctx, pass, p)
}

func (e *Engine) getLive(ctx context.Context, pass *Pass, p *planned) (*unstructured.Unstructured, bool, error) {
	live, err := pass.Target.Client.Resource(p.gvr).Namespace(p.obj.GetNamespace()).Get(ctx, p.obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return live, false, nil
}

// checkOwner refuses to take over an object that another VidraResource
// owns, or that exists without Vidra's marks. An object whose marks name an
// owner that is authoritatively gone is adopted, and only then: see
// ownerGone.
func (e *Engine) checkOwner(ctx context.Context, pass *Pass, live *unstructured.Unstructured, p *planned) *ObjectError {
	uid := live.GetLabels()[v1alpha1.OwnerUIDLabel]
	if uid == string(pass.VR.UID) {
		return nil
	}
	if uid == "" {
		return unmanagedError(pass, p, "exists and is not managed by Vidra")
	}
	owner := live.GetAnnotations()[v1alpha1.OwnedByAnnotation]
	gone, err := e.ownerGone(ctx, owner, types.UID(uid))
	if err != nil {
		return &ObjectError{Key: p.key, Index: p.index, Reason: v1alpha1.ReasonOwnedByOther, Conflict: true, Retry: true,
			Err: fmt.Errorf("carries the marks of VidraResource %s, which could not be looked up (retrying): %w", owner, err)}
	}
	if !gone {
		pass.claims = append(pass.claims, p.key)
		return &ObjectError{Key: p.key, Index: p.index, Reason: v1alpha1.ReasonOwnedByOther, Conflict: true,
			Err: fmt.Errorf("is managed by VidraResource %s; an object has one owner", owner)}
	}
	if pass.Target.Cluster != destination.LocalCluster {
		// VidraResources live in the cluster of the installation that
		// reconciles them; an owner this cluster does not hold may belong
		// to another Vidra installation sharing the remote cluster.
		return &ObjectError{Key: p.key, Index: p.index, Reason: v1alpha1.ReasonOwnedByOther, Conflict: true,
			Err: fmt.Errorf("carries the marks of VidraResource %s (UID %s), which this installation does not have: it may belong to another Vidra installation that shares the cluster; if it does not, delete the object and this resource creates it", owner, uid)}
	}
	// The marks cannot be trusted on their own: anyone who may label an
	// object can write them. Only an object Vidra has applied is adopted.
	full, _, err := e.getLive(ctx, pass, p)
	if err != nil {
		return classify(p, fmt.Errorf("read: %w", err))
	}
	if full == nil || !appliedByVidra(full.GetManagedFields()) {
		return unmanagedError(pass, p, "carries Vidra's marks but was never applied by Vidra")
	}
	// The owner named on the object is gone (deleted without its finalizer
	// running): the marks are stale and the object is free to adopt.
	klog.FromContext(ctx).Info("Adopting an object whose owner is gone", "object", p.key.String(), "previousOwner", owner, "previousOwnerUID", uid)
	return nil
}

// ownerGone reports whether the VidraResource that owner (namespace/name)
// and uid name is authoritatively gone from the cluster Vidra runs in. The
// informer cache answers when it holds the resource; when it does not (it
// may watch one namespace only, or lag behind a creation), the API server
// does.
func (e *Engine) ownerGone(ctx context.Context, owner string, uid types.UID) (bool, error) {
	key, ok := ownerKey(owner)
	if !ok {
		return true, nil
	}
	if vr, err := e.owners.VidraResources(key.Namespace).Get(key.Name); err == nil && vr.UID == uid {
		return false, nil
	}
	vr, err := e.vidra.InfrahubV1alpha1().VidraResources(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get VidraResource %s: %w", owner, err)
	}
	return vr.UID != uid, nil
}

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
	rec, known := pass.st.applied[p.key]
	if live != nil {
		hand := parseHandEdits(live.GetManagedFields(), pass.overrides)
		edits := hand.managers()
		switch {
		case len(edits) > 0 && hand.coveredBy(p.obj.Object):
			// The forced apply below takes every hand-edited field back.
			logger.V(2).Info("Taking back a hand edit", "managers", edits)
		case len(edits) > 0:
			logger.V(2).Info("Taking back a hand edit", "managers", edits)
			if keys, ok := hand.addedMetadataKeys(p.obj.Object); ok {
				resp, err := e.removeKeys(ctx, pass, p, live, keys)
				if err == nil && isSubset(p.obj.Object, resp.Object) {
					e.applied(pass, p, live, resp.GetResourceVersion(), hash)
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
		case known && rec.rv == live.GetResourceVersion() && rec.hash == hash:
			p.applied = true
			return nil
		case isSubset(p.obj.Object, live.Object) && (!known || rec.hash == hash):
			// Not after the manifest changed since Vidra's last apply: a field
			// it dropped is still in live, so live contains the new object,
			// and only an apply removes that field.
			pass.st.applied[p.key] = appliedRecord{hash: hash, rv: live.GetResourceVersion()}
			p.applied = true
			return nil
		}
	}

	resp, err := applyMeta(ctx, pass, p, live)
	if err != nil && isImmutable(err) && pass.VR.Spec.Force && live != nil {
		logger.Info("Recreating object to change an immutable field (spec.force)")
		if err := e.recreate(ctx, pass, p, live); err != nil {
			return fail(err)
		}
		// From here on it is a creation, and counted as one.
		live = nil
		pass.Out.Recreated++
		resp, err = applyMeta(ctx, pass, p, nil)
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
	e.applied(pass, p, live, resp.ResourceVersion, hash)
	return nil
}

// applied records a successful apply: the version it produced, the write
// to expect on the watch, and whether it was a creation, a change, or drift.
func (e *Engine) applied(pass *Pass, p *planned, live *unstructured.Unstructured, rv string, hash uint64) {
	prev, known := pass.st.applied[p.key]
	pass.st.applied[p.key] = appliedRecord{hash: hash, rv: rv}
	p.applied = true
	if live != nil && rv == live.GetResourceVersion() {
		return
	}
	e.registry.ExpectWrite(watchregistry.Ref{Cluster: pass.Target.Cluster, GVR: p.gvr}, p.obj.GetNamespace(), p.obj.GetName(), rv)
	pass.Out.Changed++
	switch {
	case live == nil:
		pass.Out.Created++
	default:
		pass.Out.Configured++
	}
	// Drift: an object Vidra already manages, changed while the manifest
	// did not, had to be written again. What Vidra last applied says so
	// exactly; the resource's status (read from a cache that may not show
	// the last status write yet) stands in only after a restart.
	drift := known && prev.hash == hash
	if !known {
		drift = p.inventory && pass.VR.Generation == pass.VR.Status.ObservedGeneration
	}
	if drift {
		how := "edited"
		if live == nil {
			how = "deleted"
			pass.Out.DriftDeleted++
		} else {
			pass.Out.DriftEdited++
		}
		pass.Out.Drifted = append(pass.Out.Drifted, fmt.Sprintf("%s (%s)", p.key, how))
		e.metrics.DriftCorrections.WithLabelValues(p.key.kind).Inc()
		if live != nil {
			pass.st.corrected(p.key, lastWriter(live), e.clock.Now())
		}
	}
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
	resp, err := applyMeta(ctx, pass, p, nil)
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
	e.applied(pass, p, nil, resp.ResourceVersion, hash)
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
func applyMeta(ctx context.Context, pass *Pass, p *planned, live *unstructured.Unstructured) (*metav1.PartialObjectMetadata, error) {
	obj := maps.Clone(p.obj.Object)
	md, _ := obj["metadata"].(map[string]any)
	md = maps.Clone(md)
	if md == nil {
		md = map[string]any{}
	}
	if live == nil {
		md["resourceVersion"] = createOnlyVersion
	} else {
		md["uid"] = string(live.GetUID())
	}
	obj["metadata"] = md
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", p.key, err)
	}
	force := live != nil
	return pass.Target.Meta.Resource(p.gvr).Namespace(p.obj.GetNamespace()).Patch(ctx, p.obj.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManager, Force: &force})
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
	entries, ok := managedFieldsTakenOver(live.GetManagedFields(), pass.overrides, v1alpha1.FieldManager, live.GetAPIVersion(), metav1.NewTime(e.clock.Now()))
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
	resp, err := client.Patch(ctx, p.obj.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.DriftFieldManager})
	if err != nil {
		return err
	}
	e.registry.ExpectWrite(watchregistry.Ref{Cluster: pass.Target.Cluster, GVR: p.gvr}, p.obj.GetNamespace(), p.obj.GetName(), resp.GetResourceVersion())
	return nil
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
	return pass.Target.Client.Resource(p.gvr).Namespace(p.obj.GetNamespace()).Patch(ctx, p.obj.GetName(), types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: v1alpha1.DriftFieldManager})
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
	e.registry.ExpectDelete(watchregistry.Ref{Cluster: pass.Target.Cluster, GVR: p.gvr}, p.obj.GetNamespace(), p.obj.GetName())
	uid := live.GetUID()
	bg := metav1.DeletePropagationBackground
	err := client.Delete(ctx, p.obj.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
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

// applyStage applies objects in order, stopping at nothing: every object
// gets its chance and every failure is reported.
func (e *Engine) applyStage(ctx context.Context, pass *Pass, objs []*planned) {
	for _, p := range objs {
		if oe := e.applyObject(ctx, pass, p); oe != nil {
			pass.Out.Errs = append(pass.Out.Errs, oe)
		}
	}
}

// waitEstablished waits briefly for CRDs of this manifest to be served, so
// that their custom resources can be applied in the same reconcile. A CRD
// that takes longer fails this reconcile, which retries with backoff.
func (e *Engine) waitEstablished(ctx context.Context, pass *Pass, crds []*planned) *ObjectError {
	for _, p := range crds {
		if !p.applied {
			continue
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			u, err := pass.Target.Client.Resource(p.gvr).Get(ctx, p.obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return &ObjectError{Key: p.key, Index: p.index, Reason: v1alpha1.ReasonWaitingForCRD, Retry: true,
				Err: errors.New("CustomResourceDefinition is not Established yet")}
		}
	}
	if len(crds) > 0 {
		pass.Target.Mapper.Refresh(true)
	}
	return nil
}

// isStageZero reports CRDs and Namespaces, which other objects depend on.
func isStageZero(o manifest.Object) bool { return manifest.Stage(o.Object) == 0 }

func isCRD(u *unstructured.Unstructured) bool {
	return u.GroupVersionKind().GroupKind() == schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
}

// mapAll resolves the resource of each object not mapped yet; with report,
// an unknown kind is an error of that object alone.
func (e *Engine) mapAll(pass *Pass, objs []*planned, report bool) {
	for _, p := range objs {
		if !p.gvr.Empty() {
			continue
		}
		m, err := pass.Target.Mapper.Mapping(p.obj.GroupVersionKind())
		if err != nil {
			if report {
				pass.Out.Errs = append(pass.Out.Errs, classify(p, fmt.Errorf("map kind: %w", err)))
			}
			continue
		}
		p.gvr = m.Resource
	}
}

func mapped(objs []*planned) []*planned {
	var out []*planned
	for _, p := range objs {
		if !p.gvr.Empty() {
			out = append(out, p)
		}
	}
	return out
}

// track tells the watch registry which resources this VidraResource needs
// watched. Informers are cluster-wide and label-scoped: one per type serves
// every resource, however many namespaces they write to.
func (e *Engine) track(ctx context.Context, pass *Pass, objs []*planned) {
	seen := map[schema.GroupVersionResource]bool{}
	var refs []watchregistry.Ref
	for _, p := range objs {
		if p.gvr.Empty() || seen[p.gvr] {
			continue
		}
		seen[p.gvr] = true
		refs = append(refs, watchregistry.Ref{Cluster: pass.Target.Cluster, GVR: p.gvr})
	}
	if err := e.registry.Track(pass.key, refs); err != nil {
		klog.FromContext(ctx).Error(err, "Watching managed objects failed; drift is corrected on the interval only")
	}
}

// Apply brings the objects of pass.VR on pass.Target to its manifest: it
// parses the manifest (cached per generation), resolves kinds and
// namespaces, applies CRDs and Namespaces first and then the rest, tells
// the watch registry what to watch, and prunes what left the inventory.
// Failures are in pass.Out.Errs; nothing is pruned in a pass in which
// anything failed.
func (e *Engine) Apply(ctx context.Context, pass *Pass) {
	logger := klog.FromContext(ctx)
	vr := pass.VR
	previous := inventorySet(pass.Inventory)
	// A destination that stops answering mid-pass fails every object the
	// same way; one message says it better than one per object.
	defer func() { pass.Out.Errs = collapseUnreachable(pass.Out.Errs) }()

	objs, perrs := e.parsed.parse(pass.key, vr)
	if len(perrs) > 0 {
		pass.Out.Errs = append(pass.Out.Errs, manifestErrors(perrs)...)
		return
	}
	resolved, rerrs := manifest.Resolve(objs, DefaultNamespace(vr), pass.Target.Mapper.Namespaced)
	if len(rerrs) > 0 {
		pass.Out.Errs = append(pass.Out.Errs, manifestErrors(rerrs)...)
		if !rerrs.Transient() {
			// A broken manifest changes nothing: not even its valid objects
			// are applied, so that a half-edited manifest never half-applies.
			return
		}
	}
	manifest.Sort(resolved)

	var stage0, stage1, crds []*planned
	for _, o := range resolved {
		p := &planned{obj: mark(o.Object, vr), index: o.Index, line: o.Line}
		p.key = keyOf(p.obj)
		p.inventory = previous[p.key]
		if isStageZero(o) {
			stage0 = append(stage0, p)
			if isCRD(p.obj) {
				crds = append(crds, p)
			}
		} else {
			stage1 = append(stage1, p)
		}
	}

	// Stage 0: Namespaces and CRDs, which the rest may need. Kinds of CRDs
	// in this manifest cannot be mapped before those CRDs are served, so the
	// first mapping of stage 1 reports nothing.
	all := append(slices.Clone(stage0), stage1...)
	e.mapAll(pass, stage0, true)
	e.mapAll(pass, stage1, false)
	e.track(ctx, pass, all)
	e.applyStage(ctx, pass, mapped(stage0))
	if oe := e.waitEstablished(ctx, pass, crds); oe != nil {
		pass.Out.Errs = append(pass.Out.Errs, oe)
	}
	if len(mapped(stage1)) < len(stage1) {
		e.mapAll(pass, stage1, true)
		e.track(ctx, pass, all)
	}
	e.applyStage(ctx, pass, mapped(stage1))

	desired := map[ObjectKey]bool{}
	for _, p := range all {
		desired[p.key] = true
	}
	inventory := make([]v1alpha1.ManagedResource, 0, len(all))
	for _, p := range all {
		if p.applied || p.inventory {
			inventory = append(inventory, managedResource(p.obj))
		}
	}
	if len(pass.Out.Errs) > 0 {
		for _, m := range pass.Inventory {
			if !desired[inventoryKey(m)] {
				inventory = append(inventory, m)
			}
		}
		pass.Out.Inventory = inventory
		return
	}
	kept := e.prune(ctx, pass, desired)
	pass.Out.Inventory = append(inventory, kept...)
	logger.V(3).Info("Reconciled", "objects", len(all), "changed", pass.Out.Changed, "pruned", len(pass.Out.Pruned))
}

// Finish records what the pass learnt that other resources' passes need:
// the objects of its manifest another resource owns, which that owner
// hands over rather than deletes when it lets them go.
func (e *Engine) Finish(pass *Pass) { e.setClaims(pass) }

// DefaultNamespace is where the namespaced objects of vr's manifest that
// name no namespace go.
func DefaultNamespace(vr *v1alpha1.VidraResource) string {
	if vr.Spec.Destination.Namespace != "" {
		return vr.Spec.Destination.Namespace
	}
	return vr.Namespace
}

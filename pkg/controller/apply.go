package controller

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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// objectKey identifies a managed object across API versions of its group.
type objectKey struct {
	group, kind, namespace, name string
}

func keyOf(u *unstructured.Unstructured) objectKey {
	gvk := u.GroupVersionKind()
	return objectKey{group: gvk.Group, kind: gvk.Kind, namespace: u.GetNamespace(), name: u.GetName()}
}

func (k objectKey) String() string {
	if k.namespace == "" {
		return k.kind + " " + k.name
	}
	return k.kind + " " + k.namespace + "/" + k.name
}

// planned is one desired object, marked and mapped to its resource.
type planned struct {
	obj       *unstructured.Unstructured
	key       objectKey
	gvr       schema.GroupVersionResource
	index     int
	line      int
	inventory bool // listed in the inventory before this reconcile
	applied   bool // applied or found in sync in this reconcile
}

// objectError is a failure of one object, with the condition reason it maps
// to and whether a retry can fix it without a change by a person.
type objectError struct {
	key      objectKey
	index    int
	reason   string
	retry    bool
	conflict bool
	err      error
}

func (e *objectError) Error() string {
	return fmt.Sprintf("%s (document %d): %v", e.key, e.index, e.err)
}

func (e *objectError) Unwrap() error { return e.err }

// mark returns the object to apply: the manifest's object with Vidra's
// labels and annotation, and without the fields Vidra never manages.
func mark(obj *unstructured.Unstructured, vr *v1alpha1.VidraResource) *unstructured.Unstructured {
	u := obj.DeepCopy()
	// Status belongs to the object's controller; a creationTimestamp (often
	// null in generated manifests) to the API server.
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	l := u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[v1alpha1.ManagedByLabel] = v1alpha1.ManagedByValue
	l[v1alpha1.OwnerUIDLabel] = string(vr.UID)
	u.SetLabels(l)
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[v1alpha1.OwnedByAnnotation] = vr.Namespace + "/" + vr.Name
	u.SetAnnotations(a)
	return u
}

// cacheTransform trims what the watch registry caches, which is most of the
// operator's memory: the last-applied annotation kubectl writes (a full copy
// of the object), Vidra's own managedFields entry (its field set is the
// manifest) and those of status writers. Hand-edit managers keep their field
// sets, which are taken back; every other manager keeps only its name and
// time, for the Conflict message that names a rival writer. The override
// managers are read when an object is cached, so a configuration change
// applies to objects as they next change.
func (c *Controller) cacheTransform(u *unstructured.Unstructured) error {
	if a := u.GetAnnotations(); a != nil {
		if _, ok := a["kubectl.kubernetes.io/last-applied-configuration"]; ok {
			delete(a, "kubectl.kubernetes.io/last-applied-configuration")
			u.SetAnnotations(a)
		}
	}
	if mf := u.GetManagedFields(); len(mf) > 0 {
		overrides := c.config().OverrideManagers
		kept := mf[:0]
		for _, e := range mf {
			switch {
			case e.Subresource == "status", isVidraManager(e.Manager):
				continue
			case slices.Contains(overrides, e.Manager):
			default:
				e.FieldsV1 = nil
			}
			kept = append(kept, e)
		}
		u.SetManagedFields(kept)
	}
	return nil
}

// dropManagedFields keeps VidraResources small in the informer cache: Vidra
// never reads their managedFields, and an update that omits them keeps them.
func dropManagedFields(obj any) (any, error) {
	if vr, ok := obj.(*v1alpha1.VidraResource); ok {
		vr.ManagedFields = nil
	}
	return obj, nil
}

// readLive returns the live object: from the watch registry's cache when it
// holds it, else from the API server. absent is true when no object of that
// name exists that Vidra could read: either the API server said so, or a
// synced cache says no object with Vidra's label exists by that name, and
// the API server was not asked: only an unmanaged object could exist then,
// and the create-only apply of applyAbsent detects it without changing it.
func (c *Controller) readLive(ctx context.Context, r *run, p *planned) (live *unstructured.Unstructured, absent bool, err error) {
	ref := watchregistry.Ref{Cluster: r.dest.cluster, GVR: p.gvr}
	u, err := c.registry.Get(ref, p.obj.GetNamespace(), p.obj.GetName())
	if err == nil && (r.dest.serviceAccount == "" || u.GetLabels()[v1alpha1.OwnerUIDLabel] == string(r.vr.UID)) {
		return u, false, nil
	}
	if apierrors.IsNotFound(err) {
		return nil, true, nil
	}
	return c.getLive(ctx, r, p)
}

func (c *Controller) getLive(ctx context.Context, r *run, p *planned) (*unstructured.Unstructured, bool, error) {
	live, err := r.dest.client.Resource(p.gvr).Namespace(p.obj.GetNamespace()).Get(ctx, p.obj.GetName(), metav1.GetOptions{})
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
func (c *Controller) checkOwner(ctx context.Context, r *run, live *unstructured.Unstructured, p *planned) *objectError {
	uid := live.GetLabels()[v1alpha1.OwnerUIDLabel]
	if uid == string(r.vr.UID) {
		return nil
	}
	if uid == "" {
		return unmanagedError(r, p, "exists and is not managed by Vidra")
	}
	owner := live.GetAnnotations()[v1alpha1.OwnedByAnnotation]
	gone, err := c.ownerGone(ctx, owner, types.UID(uid))
	if err != nil {
		return &objectError{key: p.key, index: p.index, reason: v1alpha1.ReasonOwnedByOther, conflict: true, retry: true,
			err: fmt.Errorf("carries the marks of VidraResource %s, which could not be looked up (retrying): %w", owner, err)}
	}
	if !gone {
		r.claims = append(r.claims, p.key)
		return &objectError{key: p.key, index: p.index, reason: v1alpha1.ReasonOwnedByOther, conflict: true,
			err: fmt.Errorf("is managed by VidraResource %s; an object has one owner", owner)}
	}
	if r.dest.cluster != localCluster {
		// VidraResources live in the cluster of the installation that
		// reconciles them; an owner this cluster does not hold may belong
		// to another Vidra installation sharing the remote cluster.
		return &objectError{key: p.key, index: p.index, reason: v1alpha1.ReasonOwnedByOther, conflict: true,
			err: fmt.Errorf("carries the marks of VidraResource %s (UID %s), which this installation does not have: it may belong to another Vidra installation that shares the cluster; if it does not, delete the object and this resource creates it", owner, uid)}
	}
	// The marks cannot be trusted on their own: anyone who may label an
	// object can write them. Only an object Vidra has applied is adopted.
	full, _, err := c.getLive(ctx, r, p)
	if err != nil {
		return classify(p, fmt.Errorf("read: %w", err))
	}
	if full == nil || !appliedByVidra(full.GetManagedFields()) {
		return unmanagedError(r, p, "carries Vidra's marks but was never applied by Vidra")
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
func (c *Controller) ownerGone(ctx context.Context, owner string, uid types.UID) (bool, error) {
	key, ok := ownerKey(owner)
	if !ok {
		return true, nil
	}
	if vr, err := c.lister.VidraResources(key.Namespace).Get(key.Name); err == nil && vr.UID == uid {
		return false, nil
	}
	vr, err := c.clients.Vidra.InfrahubV1alpha1().VidraResources(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get VidraResource %s: %w", owner, err)
	}
	return vr.UID != uid, nil
}

// appliedByVidra reports whether an Apply of Vidra's field manager wrote the
// object. Updates under any name, Vidra's own release and handover writes
// included, do not count: they are not what makes an object Vidra's.
func appliedByVidra(managedFields []metav1.ManagedFieldsEntry) bool {
	return slices.ContainsFunc(managedFields, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == v1alpha1.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply
	})
}

// isVidraManager reports the field managers of Vidra's own writes.
func isVidraManager(name string) bool {
	switch name {
	case v1alpha1.FieldManager, v1alpha1.ReleaseFieldManager, v1alpha1.HandoverFieldManager, v1alpha1.DriftFieldManager,
		v1alpha1.FinalizerFieldManager, v1alpha1.StatusFieldManager:
		return true
	}
	return false
}

// unmanagedError reports an object in the way that Vidra does not own, and
// remembers it, since the label-scoped caches cannot show it.
func unmanagedError(r *run, p *planned, what string) *objectError {
	r.st.unmanaged[p.key] = true
	// Retried with backoff: the object's labels cannot be watched, so a
	// retry is how Vidra learns that someone deleted it.
	return &objectError{key: p.key, index: p.index, reason: v1alpha1.ReasonUnmanagedExists, conflict: true, retry: true,
		err: fmt.Errorf("%s; delete it (Vidra checks again with backoff and creates it once it is gone), or remove it from the manifest", what)}
}

func ownerKey(annotation string) (key cacheKey, ok bool) {
	ns, name, found := strings.Cut(annotation, "/")
	if !found || ns == "" || name == "" {
		return key, false
	}
	return cacheKey{Namespace: ns, Name: name}, true
}

// applyObject brings one object to its desired state. It makes no request
// when the cached live object already matches: either it is the very version
// Vidra last applied, or every field the manifest sets has its value and no
// hand edit owns a field.
func (c *Controller) applyObject(ctx context.Context, r *run, p *planned) *objectError {
	logger := klog.FromContext(ctx).WithValues("object", p.key.String())
	fail := func(err error) *objectError { return classify(p, err) }

	live, absent, err := c.readLive(ctx, r, p)
	if err != nil {
		return fail(fmt.Errorf("read: %w", err))
	}
	hash := hashObject(p.obj)
	if absent && r.st.unmanaged[p.key] {
		// Known to exist without Vidra's marks: one read tells whether it
		// is still there, where the create-only apply would fail and read.
		if live, _, err = c.getLive(ctx, r, p); err != nil {
			return fail(fmt.Errorf("read: %w", err))
		}
		absent = live == nil
		if absent {
			delete(r.st.unmanaged, p.key)
		}
	}
	if absent {
		found, oerr := c.applyAbsent(ctx, r, p, hash)
		if found == nil {
			return oerr
		}
		// The object exists after all, Vidra's own behind a cache that has
		// not caught up: go on as for any live object.
		live = found
	} else if oerr := c.checkOwner(ctx, r, live, p); oerr != nil {
		return oerr
	}
	rec, known := r.st.applied[p.key]
	if live != nil {
		edits := handEdited(live, r.cfg.OverrideManagers)
		switch {
		case len(edits) > 0 && handEditsCovered(live, r.cfg.OverrideManagers, p.obj.Object):
			// The forced apply below takes every hand-edited field back.
			logger.V(2).Info("Taking back a hand edit", "managers", edits)
		case len(edits) > 0:
			logger.V(2).Info("Taking back a hand edit", "managers", edits)
			if keys, ok := handAddedKeys(live, r.cfg.OverrideManagers, p.obj.Object); ok {
				resp, err := c.removeKeys(ctx, r, p, live, keys)
				if err == nil && isSubset(p.obj.Object, resp.Object) {
					c.applied(r, p, live, resp.GetResourceVersion(), hash)
					return nil
				}
				if err == nil {
					live = resp
				}
				// A concurrent write, or more to restore: the general path.
			}
			if err := c.takeOver(ctx, r, p, live); err != nil {
				return fail(fmt.Errorf("take back fields of %s: %w", strings.Join(edits, ", "), err))
			}
		case known && rec.rv == live.GetResourceVersion() && rec.hash == hash:
			p.applied = true
			return nil
		case isSubset(p.obj.Object, live.Object) && (!known || rec.hash == hash):
			// Not after the manifest changed since Vidra's last apply: a field
			// it dropped is still in live, so live contains the new object,
			// and only an apply removes that field.
			r.st.applied[p.key] = appliedRecord{hash: hash, rv: live.GetResourceVersion()}
			p.applied = true
			return nil
		}
	}

	resp, err := applyMeta(ctx, r, p, live)
	if err != nil && isImmutable(err) && r.vr.Spec.Force && live != nil {
		logger.Info("Recreating object to change an immutable field (spec.force)")
		if err := c.recreate(ctx, r, p, live); err != nil {
			return fail(err)
		}
		// From here on it is a creation, and counted as one.
		live = nil
		r.out.recreated++
		resp, err = applyMeta(ctx, r, p, nil)
	}
	if err != nil {
		c.metrics.Applies.WithLabelValues("error").Inc()
		if isReplaced(err) {
			// Deleted, or replaced by someone else, since it was read: the
			// retry reads it again.
			return fail(fmt.Errorf("changed while Vidra applied it, retrying: %w", err))
		}
		return fail(err)
	}
	c.metrics.Applies.WithLabelValues("success").Inc()
	c.applied(r, p, live, resp.ResourceVersion, hash)
	return nil
}

// applied records a successful apply: the version it produced, the write
// to expect on the watch, and whether it was a creation, a change, or drift.
func (c *Controller) applied(r *run, p *planned, live *unstructured.Unstructured, rv string, hash uint64) {
	prev, known := r.st.applied[p.key]
	r.st.applied[p.key] = appliedRecord{hash: hash, rv: rv}
	p.applied = true
	if live != nil && rv == live.GetResourceVersion() {
		return
	}
	c.registry.ExpectWrite(watchregistry.Ref{Cluster: r.dest.cluster, GVR: p.gvr}, &metav1.ObjectMeta{Namespace: p.obj.GetNamespace(), Name: p.obj.GetName(), ResourceVersion: rv})
	r.out.changed++
	switch {
	case live == nil:
		r.out.created++
	default:
		r.out.configured++
	}
	// Drift: an object Vidra already manages, changed while the manifest
	// did not, had to be written again. What Vidra last applied says so
	// exactly; the resource's status (read from a cache that may not show
	// the last status write yet) stands in only after a restart.
	drift := known && prev.hash == hash
	if !known {
		drift = p.inventory && r.vr.Generation == r.vr.Status.ObservedGeneration
	}
	if drift {
		how := "edited"
		if live == nil {
			how = "deleted"
			r.out.driftDeleted++
		} else {
			r.out.driftEdited++
		}
		r.out.drifted = append(r.out.drifted, fmt.Sprintf("%s (%s)", p.key, how))
		c.metrics.DriftCorrections.WithLabelValues(p.key.kind).Inc()
		if live != nil {
			r.st.corrected(p.key, lastWriter(live), c.clock.Now())
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
func (c *Controller) applyAbsent(ctx context.Context, r *run, p *planned, hash uint64) (found *unstructured.Unstructured, oerr *objectError) {
	resp, err := applyMeta(ctx, r, p, nil)
	switch {
	case apierrors.IsConflict(err):
		live, _, gerr := c.getLive(ctx, r, p)
		if gerr != nil {
			return nil, classify(p, fmt.Errorf("read: %w", gerr))
		}
		if live == nil {
			return nil, classify(p, fmt.Errorf("deleted while Vidra created it, retrying: %w", err))
		}
		if oerr := c.checkOwner(ctx, r, live, p); oerr != nil {
			return nil, oerr
		}
		return live, nil
	case err != nil:
		c.metrics.Applies.WithLabelValues("error").Inc()
		return nil, classify(p, err)
	}
	c.metrics.Applies.WithLabelValues("success").Inc()
	c.applied(r, p, nil, resp.ResourceVersion, hash)
	return nil, nil
}

// lastWriter names the field manager, other than Vidra, that wrote the object
// most recently: the one a person must talk to when the writes keep coming.
func lastWriter(live *unstructured.Unstructured) string {
	var who string
	var at time.Time
	for _, e := range live.GetManagedFields() {
		if isVidraManager(e.Manager) || e.Time == nil {
			continue
		}
		if who == "" || e.Time.After(at) {
			who, at = e.Manager, e.Time.Time
		}
	}
	if who == "" {
		return "an unknown writer"
	}
	return who
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
func applyMeta(ctx context.Context, r *run, p *planned, live *unstructured.Unstructured) (*metav1.PartialObjectMetadata, error) {
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
	return r.dest.meta.Resource(p.gvr).Namespace(p.obj.GetNamespace()).Patch(ctx, p.obj.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManager, Force: &force})
}

// isReplaced reports the refusal of an apply guarded by a UID (applyMeta)
// because the object of that UID is gone: deleted (a conflict), or replaced
// by another of the same name (the UID is immutable).
func isReplaced(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	if !apierrors.IsInvalid(err) {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// takeOver hands the fields of hand-edit managers to Vidra (see
// takeOverManagedFields), guarded by the resourceVersion it read, so that a
// concurrent write makes it fail and retry rather than lose that write.
func (c *Controller) takeOver(ctx context.Context, r *run, p *planned, cached *unstructured.Unstructured) error {
	client := r.dest.client.Resource(p.gvr).Namespace(p.obj.GetNamespace())
	// The cache trims status writers' entries; managedFields are written
	// whole, so read them whole.
	live, err := client.Get(ctx, p.obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	entries, ok := takeOverManagedFields(live.GetManagedFields(), r.cfg.OverrideManagers, v1alpha1.FieldManager, live.GetAPIVersion(), metav1.NewTime(c.clock.Now()))
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
	c.registry.ExpectWrite(watchregistry.Ref{Cluster: r.dest.cluster, GVR: p.gvr}, resp)
	return nil
}

// removeKeys deletes labels and annotations added by hand with one JSON
// patch, guarded by the resourceVersion they were seen at, so that it fails
// rather than act on a version it has not seen.
func (c *Controller) removeKeys(ctx context.Context, r *run, p *planned, live *unstructured.Unstructured, paths [][]string) (*unstructured.Unstructured, error) {
	ops := []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()}}
	for _, path := range paths {
		ops = append(ops, map[string]any{"op": "remove", "path": "/" + strings.Join(escapePointer(path), "/")})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return r.dest.client.Resource(p.gvr).Namespace(p.obj.GetNamespace()).Patch(ctx, p.obj.GetName(), types.JSONPatchType, patch,
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
func (c *Controller) recreate(ctx context.Context, r *run, p *planned, live *unstructured.Unstructured) error {
	client := r.dest.client.Resource(p.gvr).Namespace(p.obj.GetNamespace())
	c.registry.ExpectDelete(watchregistry.Ref{Cluster: r.dest.cluster, GVR: p.gvr}, live)
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

func isImmutable(err error) bool {
	return apierrors.IsInvalid(err) && !isReplaced(err) && strings.Contains(strings.ToLower(err.Error()), "immutable")
}

// classify maps an API error to the condition reason a person acts on, and
// decides whether a retry with backoff can succeed without them.
func classify(p *planned, err error) *objectError {
	oe := &objectError{key: p.key, index: p.index, err: err, reason: v1alpha1.ReasonApplyFailed, retry: true}
	msg := err.Error()
	switch {
	case isUnreachable(err):
		oe.reason = v1alpha1.ReasonDestinationError
	case meta.IsNoMatchError(err):
		oe.reason = v1alpha1.ReasonUnknownKind
	case apierrors.IsNotFound(err) && p.obj.GetNamespace() != "" && strings.Contains(msg, "namespaces"):
		oe.reason = v1alpha1.ReasonNamespaceNotFound
		oe.err = fmt.Errorf("namespace %q does not exist", p.obj.GetNamespace())
	case apierrors.IsForbidden(err):
		oe.reason = v1alpha1.ReasonForbidden
	case isImmutable(err):
		oe.reason, oe.retry = v1alpha1.ReasonImmutableField, false
		oe.err = fmt.Errorf("%w (set spec.force to let Vidra recreate the object)", err)
	case apierrors.IsRequestEntityTooLargeError(err), apierrors.IsInvalid(err) && strings.Contains(msg, "Too long"):
		oe.reason, oe.retry = v1alpha1.ReasonManifestTooLarge, false
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		oe.retry = false
	}
	return oe
}

// applyStage applies objects in order, stopping at nothing: every object
// gets its chance and every failure is reported.
func (c *Controller) applyStage(ctx context.Context, r *run, objs []*planned) {
	for _, p := range objs {
		if oe := c.applyObject(ctx, r, p); oe != nil {
			r.out.errs = append(r.out.errs, oe)
		}
	}
}

// waitEstablished waits briefly for CRDs of this manifest to be served, so
// that their custom resources can be applied in the same reconcile. A CRD
// that takes longer fails this reconcile, which retries with backoff.
func (c *Controller) waitEstablished(ctx context.Context, r *run, crds []*planned) *objectError {
	for _, p := range crds {
		if !p.applied {
			continue
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			u, err := r.dest.client.Resource(p.gvr).Get(ctx, p.obj.GetName(), metav1.GetOptions{})
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
			return &objectError{key: p.key, index: p.index, reason: v1alpha1.ReasonWaitingForCRD, retry: true,
				err: errors.New("CustomResourceDefinition is not Established yet")}
		}
	}
	if len(crds) > 0 {
		r.dest.mapper.refresh(true)
	}
	return nil
}

// isStageZero reports CRDs and Namespaces, which other objects depend on.
func isStageZero(o manifest.Object) bool { return manifest.Stage(o.Object) == 0 }

func isCRD(u *unstructured.Unstructured) bool {
	return u.GroupVersionKind().GroupKind() == schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
}

// ownedByAResource is the watch registry's Keep: the caches hold only
// objects whose marks name a VidraResource this installation has, with its
// UID. Anyone who may label an object can make it match the watch's label
// selector; such objects cost the operator a stub each, not their content,
// and wake nobody.
func (c *Controller) ownedByAResource(u *unstructured.Unstructured) bool {
	_, ok := c.markedOwner(u)
	return ok
}

// markedOwner returns the VidraResource the marks of u name, from the
// informer cache, when one of that name has the UID of the owner-uid label.
func (c *Controller) markedOwner(u *unstructured.Unstructured) (*v1alpha1.VidraResource, bool) {
	uid := u.GetLabels()[v1alpha1.OwnerUIDLabel]
	key, ok := ownerKey(u.GetAnnotations()[v1alpha1.OwnedByAnnotation])
	if uid == "" || !ok {
		return nil, false
	}
	vr, err := c.lister.VidraResources(key.Namespace).Get(key.Name)
	if err != nil || string(vr.UID) != uid {
		return nil, false
	}
	return vr, true
}

package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/config"
	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// resourceState is what the controller remembers of one VidraResource
// between reconciles. Only the worker holding the key touches it: the queue
// never hands one key to two workers at once.
type resourceState struct {
	uid types.UID
	// applied remembers, per object, the resourceVersion Vidra's last apply
	// produced and the hash of what it applied: while both match, the object
	// is in sync without comparing it field by field.
	applied map[objectKey]appliedRecord
	// unmanaged remembers objects found to exist without Vidra's marks,
	// which the label-scoped caches cannot show.
	unmanaged map[objectKey]bool
	// edits remembers recent corrections of edited objects, to tell a
	// one-off hand edit from another writer that keeps changing a field
	// Vidra owns.
	edits map[objectKey]*editHistory
	// claims are the objects of this resource's manifest that another live
	// VidraResource owns, on the cluster named by claimsCluster: when that
	// owner lets one go, it hands it over here instead of deleting it.
	// Unlike the rest, they are read by other keys' workers, under the
	// controller's mu.
	claims        map[objectKey]bool
	claimsCluster string
}

type editHistory struct {
	times  []time.Time
	writer string
}

// Contention: an object edited back this many times within the window has
// another writer fighting Vidra over it.
const (
	contentionEdits  = 3
	contentionWindow = 2 * time.Minute
)

// corrected records that Vidra restored an object someone edited.
func (st *resourceState) corrected(key objectKey, writer string, now time.Time) {
	if st.edits == nil {
		st.edits = map[objectKey]*editHistory{}
	}
	h := st.edits[key]
	if h == nil {
		h = &editHistory{}
		st.edits[key] = h
	}
	h.times = append(h.times, now)
	h.writer = writer
}

// contended lists, sorted, the objects another writer keeps changing, and
// forgets corrections that left the window.
func (st *resourceState) contended(now time.Time) []string {
	var out []string
	for key, h := range st.edits {
		h.times = slices.DeleteFunc(h.times, func(t time.Time) bool { return now.Sub(t) > contentionWindow })
		if len(h.times) == 0 {
			delete(st.edits, key)
			continue
		}
		if len(h.times) >= contentionEdits {
			out = append(out, fmt.Sprintf("%s was changed by %s %d times in %s; Vidra restores it each time (remove the field from the manifest, or stop the other writer)",
				key, h.writer, len(h.times), contentionWindow))
		}
	}
	slices.Sort(out)
	return out
}

type appliedRecord struct {
	hash uint64
	rv   string
}

func (c *Controller) stateFor(key cacheKey, uid types.UID) *resourceState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.state[key]
	if st == nil || st.uid != uid {
		st = &resourceState{uid: uid, applied: map[objectKey]appliedRecord{}, unmanaged: map[objectKey]bool{}}
		c.state[key] = st
	}
	return st
}

// setClaims records the objects of r's manifest that another resource owns,
// replacing those of the previous reconcile: a resource that no longer
// declares an object, or owns it now, has no claim on it.
func (c *Controller) setClaims(r *run) {
	var claims map[objectKey]bool
	if len(r.claims) > 0 {
		claims = make(map[objectKey]bool, len(r.claims))
		for _, k := range r.claims {
			claims[k] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r.st.claims = claims
	if r.dest != nil {
		r.st.claimsCluster = r.dest.cluster
	}
}

// claimant returns a live VidraResource, other than the one of uid, that
// declares the object of key on cluster and found it owned by another, or
// false when there is none.
func (c *Controller) claimant(cluster string, key objectKey, uid types.UID) (*v1alpha1.VidraResource, bool) {
	c.mu.Lock()
	candidates := map[cacheKey]types.UID{}
	for k, st := range c.state {
		if st.uid != uid && st.claimsCluster == cluster && st.claims[key] {
			candidates[k] = st.uid
		}
	}
	c.mu.Unlock()
	// In a stable order, so that of several claimants the same one wins on
	// every try.
	for _, k := range slices.SortedFunc(maps.Keys(candidates), func(a, b cacheKey) int { return strings.Compare(a.String(), b.String()) }) {
		vr, err := c.lister.VidraResources(k.Namespace).Get(k.Name)
		if err == nil && vr.UID == candidates[k] && vr.DeletionTimestamp == nil && !vr.Spec.Suspend {
			return vr, true
		}
	}
	return nil, false
}

// forget drops everything held for a VidraResource that is gone.
func (c *Controller) forget(key cacheKey) {
	c.registry.Forget(key)
	c.dests.release(key)
	c.parsed.forget(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.state, key)
}

// run is the working set of one reconcile.
type run struct {
	vr   *v1alpha1.VidraResource
	st   *resourceState
	cfg  *config.Config
	dest *destination
	out  outcome
	// claims are the objects found owned by another live VidraResource.
	claims []objectKey
	// inventory is the inventory on the destination of this reconcile:
	// status.managedResources, or nothing once the objects of a previous
	// destination have been let go (leavePreviousCluster).
	inventory []v1alpha1.ManagedResource
}

// outcome is what a reconcile did and what went wrong.
type outcome struct {
	// recreated counts objects deleted and created again (spec.force),
	// among created.
	changed, created, configured, recreated int
	// drifted describes the objects restored; driftDeleted and driftEdited
	// count them among created and configured.
	drifted                   []string
	driftDeleted, driftEdited int
	pruned                    []string
	// released are objects that left the manifest and stay, without
	// Vidra's marks (spec.prune false).
	released []string
	errs     []*objectError
	// inventory is the status.managedResources to write, and
	// inventoryCluster the status.inventoryCluster.
	inventory        []v1alpha1.ManagedResource
	inventoryCluster *v1alpha1.ClusterReference
}

func (o *outcome) retryable() bool {
	for _, e := range o.errs {
		if !e.retry {
			return false
		}
	}
	return len(o.errs) > 0
}

// syncResult tells processNextWorkItem when to come back.
type syncResult struct {
	requeueAfter   time.Duration
	requeueTrigger Trigger
	conflict       bool
}

// sync reconciles one VidraResource. It returns an error to be retried with
// backoff; failures a retry cannot fix are reported in status and return nil.
func (c *Controller) sync(ctx context.Context, key cacheKey) (syncResult, error) {
	cached, err := c.lister.VidraResources(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.forget(key)
		return syncResult{}, nil
	}
	if err != nil {
		return syncResult{}, err
	}
	vr := cached.DeepCopy()
	if vr.DeletionTimestamp != nil {
		return c.finalize(ctx, key, vr)
	}
	st := c.stateFor(key, vr.UID)
	if !slices.Contains(vr.Finalizers, v1alpha1.Finalizer) {
		if vr, err = c.setFinalizer(ctx, vr, true); err != nil {
			return syncResult{}, err
		}
	}
	if vr.Spec.Suspend {
		c.registry.Forget(key)
		return syncResult{}, c.writeSuspended(ctx, vr)
	}

	r := &run{vr: vr, st: st, cfg: c.config()}
	c.reconcile(ctx, key, r)
	c.explainMissingServiceAccount(ctx, r)
	c.setClaims(r)
	res := syncResult{requeueAfter: c.interval(vr), requeueTrigger: TriggerInterval}
	for _, e := range r.out.errs {
		res.conflict = res.conflict || e.conflict
	}
	if err := c.writeStatus(ctx, r); err != nil {
		return res, err
	}
	if r.out.retryable() {
		return res, errors.Join(errsOf(r.out.errs)...)
	}
	return res, nil
}

func errsOf(errs []*objectError) []error {
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return out
}

// reconcile is the level-triggered core: desired state from the manifest,
// actual state from caches, and the writes that close the gap.
func (c *Controller) reconcile(ctx context.Context, key cacheKey, r *run) {
	logger := klog.FromContext(ctx)
	vr := r.vr
	// Until the manifest is understood, the inventory stays as it was.
	r.inventory = vr.Status.ManagedResources
	r.out.inventory = vr.Status.ManagedResources
	r.out.inventoryCluster = vr.Status.InventoryCluster
	if !c.leavePreviousCluster(ctx, r) {
		return
	}
	r.out.inventoryCluster = destinationRef(vr)
	previous := inventorySet(r.inventory)

	dest, err := c.dests.resolve(ctx, vr, c.opts.DefaultServiceAccount)
	if err != nil {
		reason, retry := destinationFailure(err)
		r.out.errs = append(r.out.errs, &objectError{index: -1, reason: reason, retry: retry, err: err})
		return
	}
	r.dest = dest
	// A destination that stops answering mid-reconcile fails every object
	// the same way; one message says it better than one per object.
	defer func() { r.out.errs = collapseUnreachable(r.out.errs) }()

	objs, perrs := c.parsed.parse(key, vr)
	if len(perrs) > 0 {
		r.out.errs = append(r.out.errs, manifestErrors(perrs)...)
		return
	}
	resolved, rerrs := manifest.Resolve(objs, defaultNamespace(vr), dest.mapper.namespaced)
	if len(rerrs) > 0 {
		r.out.errs = append(r.out.errs, manifestErrors(rerrs)...)
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
	c.mapAll(r, stage0, true)
	c.mapAll(r, stage1, false)
	c.track(ctx, key, r, all)
	c.applyStage(ctx, r, mapped(stage0))
	if oe := c.waitEstablished(ctx, r, crds); oe != nil {
		r.out.errs = append(r.out.errs, oe)
	}
	if len(mapped(stage1)) < len(stage1) {
		c.mapAll(r, stage1, true)
		c.track(ctx, key, r, all)
	}
	c.applyStage(ctx, r, mapped(stage1))

	desired := map[objectKey]bool{}
	for _, p := range all {
		desired[p.key] = true
	}
	inventory := make([]v1alpha1.ManagedResource, 0, len(all))
	for _, p := range all {
		if p.applied || p.inventory {
			inventory = append(inventory, managedResource(p.obj))
		}
	}
	if len(r.out.errs) > 0 {
		// Nothing is pruned in a reconcile in which anything failed: the
		// objects that left the manifest stay in the inventory.
		for _, m := range r.inventory {
			if !desired[inventoryKey(m)] {
				inventory = append(inventory, m)
			}
		}
		r.out.inventory = inventory
		return
	}
	kept := c.prune(ctx, r, desired)
	r.out.inventory = append(inventory, kept...)
	logger.V(3).Info("Reconciled", "objects", len(all), "changed", r.out.changed, "pruned", len(r.out.pruned))
}

// destinationRef is the cluster of spec.destination, as
// status.inventoryCluster records it: the local cluster has no server.
func destinationRef(vr *v1alpha1.VidraResource) *v1alpha1.ClusterReference {
	ref := &v1alpha1.ClusterReference{KubeconfigSecretRef: vr.Spec.Destination.KubeconfigSecretRef.DeepCopy()}
	if !isLocalServer(vr.Spec.Destination.Server) {
		ref.Server = vr.Spec.Destination.Server
	}
	return ref
}

// previousDestination returns vr aimed at the cluster its inventory is on,
// and whether that is another cluster than spec.destination's. An inventory
// without a cluster (written before Vidra recorded one) is on the current
// destination.
func previousDestination(vr *v1alpha1.VidraResource) (*v1alpha1.VidraResource, bool) {
	prev := vr.Status.InventoryCluster
	if prev == nil || len(vr.Status.ManagedResources) == 0 || equality.Semantic.DeepEqual(prev, destinationRef(vr)) {
		return vr, false
	}
	old := vr.DeepCopy()
	old.Spec.Destination.Server = prev.Server
	old.Spec.Destination.KubeconfigSecretRef = prev.KubeconfigSecretRef.DeepCopy()
	return old, true
}

// leavePreviousCluster prunes (or, with prune false, releases) the
// inventory on the cluster it is on when spec.destination has moved to
// another, so that the objects there are not forgotten. Objects it cannot
// settle stay in the inventory, with their cluster, and the reconcile stops
// there, to be retried with backoff: it returns false. When the previous
// cluster's kubeconfig Secret is gone, nothing can reach its objects again:
// they are left behind with a Warning Event.
func (c *Controller) leavePreviousCluster(ctx context.Context, r *run) bool {
	old, moved := previousDestination(r.vr)
	if !moved {
		return true
	}
	logger := klog.FromContext(ctx).WithValues("previousServer", old.Spec.Destination.Server)
	dest, err := c.dests.resolve(ctx, old, c.opts.DefaultServiceAccount)
	switch {
	case err != nil && isSecretGone(err):
		c.event(r.vr, true, "LeftBehind", "The destination moved and the previous one cannot be reached any more (%v); left behind there: %s",
			err, truncate(inventoryNames(r.inventory)))
		r.inventory, r.out.inventory = nil, nil
		return true
	case err != nil:
		r.out.errs = append(r.out.errs, &objectError{index: -1, reason: v1alpha1.ReasonDestinationError, retry: true,
			err: fmt.Errorf("spec.destination moved; the objects on the previous destination are cleaned up first, which failed (retrying): %w", err)})
		return false
	}
	leave := &run{vr: old, st: r.st, cfg: r.cfg, dest: dest, inventory: r.inventory}
	kept := c.prune(ctx, leave, nil)
	r.out.pruned = append(r.out.pruned, leave.out.pruned...)
	r.out.released = append(r.out.released, leave.out.released...)
	r.out.changed += leave.out.changed
	if len(leave.out.errs) > 0 {
		r.out.errs = append(r.out.errs, leave.out.errs...)
		r.out.inventory = kept
		return false
	}
	logger.Info("Left the previous destination", "objects", len(r.inventory))
	// Records of applies there say nothing of the new cluster's objects.
	clear(r.st.applied)
	clear(r.st.unmanaged)
	r.inventory, r.out.inventory = nil, nil
	return true
}

func inventoryNames(items []v1alpha1.ManagedResource) string {
	names := make([]string, len(items))
	for i, m := range items {
		names[i] = inventoryKey(m).String()
	}
	return strings.Join(names, ", ")
}

// mapAll resolves the resource of each object not mapped yet; with report,
// an unknown kind is an error of that object alone.
func (c *Controller) mapAll(r *run, objs []*planned, report bool) {
	for _, p := range objs {
		if !p.gvr.Empty() {
			continue
		}
		m, err := r.dest.mapper.mapping(p.obj.GroupVersionKind())
		if err != nil {
			if report {
				r.out.errs = append(r.out.errs, classify(p, fmt.Errorf("map kind: %w", err)))
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
func (c *Controller) track(ctx context.Context, key cacheKey, r *run, objs []*planned) {
	seen := map[schema.GroupVersionResource]bool{}
	var refs []watchregistry.Ref
	for _, p := range objs {
		if p.gvr.Empty() || seen[p.gvr] {
			continue
		}
		seen[p.gvr] = true
		refs = append(refs, watchregistry.Ref{Cluster: r.dest.cluster, GVR: p.gvr})
	}
	if err := c.registry.Track(key, refs); err != nil {
		klog.FromContext(ctx).Error(err, "Watching managed objects failed; drift is corrected on the interval only")
	}
}

func managedResource(u interface {
	GetAPIVersion() string
	GetKind() string
	GetNamespace() string
	GetName() string
}) v1alpha1.ManagedResource {
	return v1alpha1.ManagedResource{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

func inventoryKey(m v1alpha1.ManagedResource) objectKey {
	gv, _ := schema.ParseGroupVersion(m.APIVersion)
	return objectKey{group: gv.Group, kind: m.Kind, namespace: m.Namespace, name: m.Name}
}

func inventorySet(items []v1alpha1.ManagedResource) map[objectKey]bool {
	set := make(map[objectKey]bool, len(items))
	for _, m := range items {
		set[inventoryKey(m)] = true
	}
	return set
}

// manifestErrors turns parse and resolve errors into object errors, keeping
// their document index and line in the message.
func manifestErrors(errs manifest.ErrorList) []*objectError {
	out := make([]*objectError, 0, len(errs))
	transient := errs.Transient()
	for _, e := range errs {
		out = append(out, &objectError{index: e.Index, reason: e.Reason, retry: transient, err: e})
	}
	return out
}

// setFinalizer adds or removes Vidra's finalizer with a merge patch that
// carries the resourceVersion read, so it fails rather than overwrite a
// concurrent change of the list.
func (c *Controller) setFinalizer(ctx context.Context, vr *v1alpha1.VidraResource, add bool) (*v1alpha1.VidraResource, error) {
	finalizers := slices.DeleteFunc(slices.Clone(vr.Finalizers), func(f string) bool { return f == v1alpha1.Finalizer })
	if add {
		finalizers = append(finalizers, v1alpha1.Finalizer)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"finalizers":%s}}`, vr.ResourceVersion, jsonList(finalizers))
	out, err := c.dests.local.meta.Resource(v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.ResourcePlural)).Namespace(vr.Namespace).
		Patch(ctx, vr.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.FinalizerFieldManager})
	if err != nil {
		return nil, fmt.Errorf("update finalizer of VidraResource %s/%s: %w", vr.Namespace, vr.Name, err)
	}
	// The patch was guarded by the resourceVersion read, so the finalizers
	// and the version are all that changed; the answer is metadata only.
	vr = vr.DeepCopy()
	vr.Finalizers, vr.ResourceVersion = out.Finalizers, out.ResourceVersion
	return vr, nil
}

func jsonList(items []string) string {
	if len(items) == 0 {
		return "null"
	}
	b := []byte("[")
	for i, s := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%q", s)
	}
	return string(append(b, ']'))
}

// explainMissingServiceAccount replaces the Forbidden errors of a reconcile
// whose ServiceAccount does not exist with what is really wrong. The API
// server refuses every request of an impersonated ServiceAccount that does
// not exist as it refuses one without rights ("User ... cannot patch"),
// which sends a person looking for a missing Role rather than a typo in
// spec.serviceAccountName. It costs a read only when a write was refused.
func (c *Controller) explainMissingServiceAccount(ctx context.Context, r *run) {
	forbidden := func(e *objectError) bool { return e.reason == v1alpha1.ReasonForbidden }
	if r.dest == nil || r.dest.serviceAccount == "" || r.dest.cluster != localCluster || !slices.ContainsFunc(r.out.errs, forbidden) {
		return
	}
	ns, name, _ := strings.Cut(r.dest.serviceAccount, "/")
	if _, err := c.clients.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return
	}
	missing := &objectError{index: -1, reason: v1alpha1.ReasonServiceAccountNotFound, retry: true,
		err: fmt.Errorf("ServiceAccount %s does not exist, so every write as it is refused: create it and grant it the rights the manifest needs, or correct spec.serviceAccountName", r.dest.serviceAccount)}
	r.out.errs = append([]*objectError{missing}, slices.DeleteFunc(r.out.errs, forbidden)...)
}

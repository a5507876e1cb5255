// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/health"
	"github.com/vidra-operator/vidra/internal/manifest"
	"github.com/vidra-operator/vidra/internal/wording"
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
	wrote     bool // created or changed by this reconcile's apply
	// health is the object's kstatus health as this pass leaves it.
	health        health.Status
	healthMessage string
	policy        objectPolicy
	// ig are the fields spec.ignore hands to others, removed from obj.
	ig ignored
	// drift describes, before a write that corrects drift, what the write
	// takes back; marks is set instead when the write only adds Vidra's
	// own marks.
	drift *v1alpha1.DriftRecord
	marks bool
	// adoptedFrom names the gone VidraResource whose object this one
	// adopts (spec.adoptOrphans), for the Event of a successful apply, and
	// adoptVersion is the resourceVersion whose marks were read to decide
	// it: the apply is made at that version only, so that of two resources
	// adopting one object the second fails rather than write over the
	// first's marks.
	adoptedFrom  string
	adoptVersion string
	// unchanged: the object's part of the manifest is what Vidra last
	// applied; a write now corrects drift.
	unchanged bool
	// created is the object as the API server created it in this pass.
	created *unstructured.Unstructured
}

// observe records the health of the object as it now is: live (nil when it
// was just created: the manifest's object) with the generation the pass's
// write gave it, 0 when the pass did not write it. A write that changed the
// spec bumps the generation, so the object's controller has not observed
// it yet: a Deployment is InProgress until it has, whatever its cached
// status said of the previous generation.
func (p *planned) observe(live *unstructured.Unstructured, generation int64) {
	obj := live
	switch {
	case obj != nil:
	case p.created != nil:
		obj = p.created
	default:
		obj = p.obj
	}
	if generation != 0 && generation != obj.GetGeneration() {
		md, _ := obj.Object["metadata"].(map[string]any)
		md = maps.Clone(md)
		if md == nil {
			md = map[string]any{}
		}
		md["generation"] = generation
		cp := maps.Clone(obj.Object)
		cp["metadata"] = md
		obj = &unstructured.Unstructured{Object: cp}
	}
	p.health, p.healthMessage = health.Of(obj)
	// The created object served this judgement only: a pass that kept it
	// until its end would hold every answer of its creations at once, and
	// a tenant's own server answers with as much as Vidra reads.
	p.created = nil
}

// applyPass brings the objects of pass.VR on pass.Target to its manifest:
// it parses the manifest (cached per generation), resolves kinds and
// namespaces, applies CRDs and Namespaces first and then the rest, tells
// the watch registry what to watch, and prunes what left the inventory.
// Failures are in pass.Out.Errs; a failure holds back only the prunes it
// could be confused with (prunehold.go), and the entries that no status
// write recorded yet are part of the inventory (unrecorded.go).
func (e *Engine) applyPass(ctx context.Context, pass *Pass) {
	vr := pass.VR
	pass.Inventory = pass.st.withUnrecorded(pass.Inventory, pass.Target.Cluster)
	pass.Out.Inventory = pass.Inventory
	defer func() { pass.st.rememberInventory(vr.Status.ManagedResources, pass.Out.Inventory, pass.Target.Cluster) }()
	previous := inventorySet(pass.Inventory)
	// A destination that stops answering mid-pass fails every object the
	// same way; one message says it better than one per object. So does a
	// pass that runs out of time, its deadline cutting the last requests.
	var visited, total int
	defer func() {
		pass.Out.Errs = collapseUnreachable(collapseOutOfTime(ctx, pass.Out.Errs, visited, total))
	}()

	resolved, rules, ok := e.desiredObjects(ctx, pass)
	if !ok {
		return
	}
	st := planStages(pass, resolved, rules, previous)
	total = len(st.all)
	visited = e.applyStages(ctx, pass, st)

	// Objects a killed process created and never recorded: pruned below
	// when the manifest no longer declares them.
	pass.Inventory = append(pass.Inventory, e.findUnrecorded(ctx, pass, st.all, st.desired, maps.Clone(previous))...)
	e.conclude(ctx, pass, st)
	klog.FromContext(ctx).V(3).Info("Reconciled", "objects", len(st.all), "changed", pass.Out.Changed, "pruned", len(pass.Out.Pruned))
}

// desiredObjects returns the objects of pass's manifest, resolved, checked
// and sorted, and its compiled spec.ignore; ok is false when the pass can
// apply nothing, the reasons being in pass.Out.Errs. The manifest's errors
// and spec.ignore's are reported together, so that fixing one does not
// reveal the other only on the next try.
func (e *Engine) desiredObjects(ctx context.Context, pass *Pass) (resolved []manifest.Object, rules *ignoreRules, ok bool) {
	vr := pass.VR
	got := e.manifests.objects(ctx, pass.key, vr)
	if len(got.fails) > 0 {
		// Nothing is applied, and so nothing pruned: a source missing for
		// a moment must not mean its objects left the manifest.
		pass.Out.Errs = append(pass.Out.Errs, got.fails...)
		return nil, nil, false
	}
	objs, perrs := got.objs, got.errs
	pass.Out.Sources = got.applied
	rules, ierrs := checkSpec(vr)
	if len(perrs) > 0 || len(ierrs) > 0 {
		pass.Out.Errs = append(pass.Out.Errs, manifestErrors(perrs)...)
		for _, err := range ierrs {
			pass.Out.Fail(v1alpha1.ReasonInvalidManifest, false, err)
		}
		return nil, nil, false
	}
	resolved, rerrs := manifest.Resolve(objs, vr.DefaultNamespace(), pass.Target.Mapper.Namespaced)
	if len(rerrs) > 0 {
		pass.Out.Errs = append(pass.Out.Errs, manifestErrors(rerrs)...)
		if !rerrs.Transient() {
			// A broken manifest changes nothing: not even its valid objects
			// are applied, so that a half-edited manifest never half-applies.
			return nil, nil, false
		}
	}
	if err := checkInventoryNames(resolved); err != nil {
		pass.Out.Fail(v1alpha1.ReasonManifestTooLarge, false, err)
		return nil, nil, false
	}
	if oe := checkManifestKinds(resolved, e.registry.Informers().PerTenant); oe != nil {
		pass.Out.Errs = append(pass.Out.Errs, oe)
		return nil, nil, false
	}
	manifest.Sort(resolved)
	return resolved, rules, true
}

// checkSpec compiles vr's spec.ignore and checks the rest of the spec the
// engine reads before it applies anything: errs are why nothing may be
// applied.
func checkSpec(vr *v1alpha1.VidraResource) (rules *ignoreRules, errs []error) {
	rules, errs = compileIgnore(vr.Spec.Ignore)
	switch vr.Spec.DriftPolicy {
	case "", v1alpha1.DriftPolicyCorrect, v1alpha1.DriftPolicyReport:
	default:
		// The schema refuses it; a resource it did not validate must not
		// fall back to correcting what its owner asked to be reported.
		errs = append(errs, fmt.Errorf("spec.driftPolicy: %q is not a drift policy: want Correct or Report", vr.Spec.DriftPolicy))
	}
	if err := checkDefaultNamespace(vr); err != nil {
		errs = append(errs, err)
	}
	return rules, errs
}

// stages are a pass's objects in the order they are applied.
type stages struct {
	// stage0 are the Namespaces and CRDs, crds the CRDs among them, and
	// stage1 the rest; all are both stages.
	stage0, stage1, crds, all []*planned
	// desired are the keys of every object of the manifest, those of apply
	// policy Ignore included.
	desired map[ObjectKey]bool
}

// planStages marks and sorts resolved's objects into stages. Objects whose
// apply policy is Ignore are neither applied nor inventoried, so never
// pruned or deleted either.
func planStages(pass *Pass, resolved []manifest.Object, rules *ignoreRules, previous map[ObjectKey]bool) stages {
	st := stages{desired: map[ObjectKey]bool{}}
	for _, o := range resolved {
		p := newPlanned(pass.VR, o, rules, previous)
		st.desired[p.key] = true
		if p.policy.ignored {
			// Nothing is compared any more: drift reported before the
			// object was left alone would stay listed for ever.
			delete(pass.st.reported, p.key)
			continue
		}
		if !isStageZero(o) {
			st.stage1 = append(st.stage1, p)
			continue
		}
		st.stage0 = append(st.stage0, p)
		if isCRD(p.obj) {
			st.crds = append(st.crds, p)
		}
	}
	st.all = append(slices.Clone(st.stage0), st.stage1...)
	return st
}

// newPlanned marks o, an object of vr's resolved manifest, and reads its
// policy; unless its policy is Ignore, it strips the fields rules hand to
// others and notes whether the object was in the inventory (previous).
// Apply and Plan both start each object here.
func newPlanned(vr *v1alpha1.VidraResource, o manifest.Object, rules *ignoreRules, previous map[ObjectKey]bool) *planned {
	p := &planned{obj: mark(o.Object, vr), index: o.Index, line: o.Line}
	p.key = keyOf(p.obj)
	if p.policy = policyOf(p.obj); p.policy.ignored {
		return p
	}
	p.ig = rules.strip(p.obj)
	p.inventory = previous[p.key]
	return p
}

// applyStages applies st's objects, stage 0 first: Namespaces and CRDs,
// which the rest may need. Kinds of CRDs in this manifest cannot be mapped
// before those CRDs are served, so the first mapping of stage 1 reports
// nothing. It returns how many objects it went through.
func (e *Engine) applyStages(ctx context.Context, pass *Pass, st stages) (visited int) {
	// Past the reconcile's deadline nothing more is asked of the
	// destination: mapping an unknown kind reads discovery, whose requests
	// know no deadline but their own.
	outOfTime := func() bool { return destination.OutOfTime(ctx) != nil }
	e.mapAll(pass, st.stage0, true)
	if !outOfTime() {
		e.mapAll(pass, st.stage1, false)
	}
	// The kinds the inventory holds are watched before anything is
	// applied, so that the pass reads them from caches; the rest once the
	// pass knows which it wrote.
	_ = e.track(ctx, pass, st.all, heldByInventory, true)
	visited += e.applyStage(ctx, pass, mapped(st.stage0))
	if !outOfTime() {
		if oe := e.waitEstablished(ctx, pass, st.crds); oe != nil {
			pass.Out.Errs = append(pass.Out.Errs, oe)
		}
	}
	if len(mapped(st.stage1)) < len(st.stage1) && !outOfTime() {
		e.mapAll(pass, st.stage1, true)
	}
	visited += e.applyStage(ctx, pass, mapped(st.stage1))
	if oe := tooManyKinds(e.track(ctx, pass, st.all, watchNeeded, false)); oe != nil {
		// First: the reason of the Ready condition and of the Event.
		pass.Out.Errs = append([]*ObjectError{oe}, pass.Out.Errs...)
	}
	return visited
}

// conclude writes the pass's drift and inventory into pass.Out, and prunes
// what left the manifest but for what the pass's failures hold back.
func (e *Engine) conclude(ctx context.Context, pass *Pass, st stages) {
	if !pass.report {
		clear(pass.st.reported)
	}
	pass.Out.Drift = pass.st.driftList(func(k ObjectKey) bool { return st.desired[k] })
	pass.Out.DriftHistory = pass.st.history
	inventory := make([]v1alpha1.ManagedResource, 0, len(st.all))
	for _, p := range st.all {
		if p.applied || p.inventory {
			e.observeCached(pass, p)
			m := managedResource(p.obj)
			m.Health = string(p.health)
			if p.health != health.Current {
				m.HealthMessage = p.healthMessage
			}
			inventory = append(inventory, m)
		}
	}
	held := e.holds(ctx, pass, st.desired)
	skip := maps.Clone(st.desired)
	for _, m := range pass.Inventory {
		if k := inventoryKey(m); !st.desired[k] && held[k] != (PruneHold{}) {
			skip[k] = true
			inventory = append(inventory, m)
		}
	}
	pass.Out.Held = sortedHolds(pass.Inventory, held)
	kept := e.prune(ctx, pass, skip)
	pass.Out.Inventory = append(inventory, kept...)
}

// holds decides which entries of pass's inventory that left the manifest
// (not in desired) the pass's failures hold back from the prune. Past the
// reconcile's deadline every one is: nothing more is asked of the
// destination.
func (e *Engine) holds(ctx context.Context, pass *Pass, desired map[ObjectKey]bool) map[ObjectKey]PruneHold {
	var leaving []ObjectKey
	for _, m := range pass.Inventory {
		if k := inventoryKey(m); !desired[k] {
			leaving = append(leaving, k)
		}
	}
	errs := pass.Out.Errs
	if oot := destination.OutOfTime(ctx); oot != nil {
		errs = append(slices.Clone(errs), &ObjectError{Index: -1, Reason: v1alpha1.ReasonReconcileTimeout, Err: oot})
	}
	return decideHolds(leaving, errs)
}

// AllCached reports whether every object of in.VR's inventory (what the
// resource's last reconcile applied, status.managedResources) is in a
// synced cache of the local cluster with this resource's marks: what a look
// without a request can tell, and nothing of whether the objects are as
// declared. A replica that takes on many resources at once (a rebalance, a
// start) reconciles first those for which it is not so, so that an object
// deleted while nobody served its resource is restored before thousands of
// intact resources are verified. The look reads the inventory rather than
// the manifest: parsing thousands of manifests for it would cost as much as
// the lists, and the answer only orders reconciles (the caller checks that
// the inventory is of the resource's current generation). An empty
// inventory, a kind that does not map, or a destination on another cluster
// is never all cached. in.Target must be set (in.Resolve is not called).
func (e *Engine) AllCached(ctx context.Context, in Input) bool {
	if in.TargetErr != nil || in.Previous != nil {
		return false
	}
	pass := e.NewPass(in.VR, in.OverrideManagers)
	pass.Target = in.Target
	vr := pass.VR
	if pass.Target == nil || pass.Target.Cluster != destination.LocalCluster || len(pass.Inventory) == 0 {
		return false
	}
	all := make([]*planned, 0, len(pass.Inventory))
	for _, m := range pass.Inventory {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(m.APIVersion)
		u.SetKind(m.Kind)
		u.SetNamespace(m.Namespace)
		u.SetName(m.Name)
		all = append(all, &planned{obj: u})
	}
	e.mapAll(pass, all, false)
	if len(mapped(all)) < len(all) {
		return false
	}
	// The refs the reconcile tracks too: their informers start now.
	_ = e.track(ctx, pass, all, heldByInventory, true)
	owned := labels.SelectorFromSet(labels.Set{v1alpha1.OwnerUIDLabel: string(vr.UID)})
	for _, p := range all {
		ref := watchregistry.Ref{Cluster: pass.Target.Cluster, GVR: p.gvr}
		ok, err := e.registry.Has(ref, p.obj.GetNamespace(), p.obj.GetName(), owned)
		if errors.Is(err, watchregistry.ErrNotSynced) && e.waitListed(ctx, ref) {
			ok, err = e.registry.Has(ref, p.obj.GetNamespace(), p.obj.GetName(), owned)
		}
		if err != nil || !ok {
			return false
		}
	}
	return true
}

// observeCached gives an object the pass did not get to (its apply
// failed, or its kind is not served) the health its cached version shows.
func (e *Engine) observeCached(pass *Pass, p *planned) {
	if p.health != "" {
		return
	}
	if p.gvr.Empty() {
		p.health, p.healthMessage = health.Unknown, "its kind is not served"
		return
	}
	u, err := e.registry.Get(watchregistry.Ref{Cluster: pass.Target.Cluster, GVR: p.gvr}, p.obj.GetNamespace(), p.obj.GetName())
	switch {
	case err == nil:
		p.health, p.healthMessage = health.Of(u)
	case errors.Is(err, watchregistry.ErrStub):
		p.health, p.healthMessage = health.Unknown, "not cached: over its namespace's cache budget"
	case apierrors.IsNotFound(err):
		p.health, p.healthMessage = health.Of(nil)
	default:
		p.health, p.healthMessage = health.Unknown, "not known yet"
	}
}

// Finish completes the pass once the work on its destination is done,
// on ctx rather than the reconcile's deadline: it explains a missing
// ServiceAccount (explainMissingServiceAccount), and records what the pass
// learnt that other resources' passes need: the objects of its manifest
// another resource owns, which that owner hands over rather than deletes
// when it lets them go.
func (e *Engine) Finish(ctx context.Context, pass *Pass) {
	e.explainMissingServiceAccount(ctx, pass)
	e.setClaims(pass)
}

// checkDefaultNamespace refuses a spec.destination.namespace that is not a
// namespace name. The schema refuses it already; a resource stored before
// it did, or by a client that skips validation, must not reach a request:
// a namespace becomes a segment of a request's path, and "a/b/../c" would
// make it another path, such as a service's proxy, asked with whatever
// identity makes the request.
func checkDefaultNamespace(vr *v1alpha1.VidraResource) error {
	ns := vr.Spec.Destination.Namespace
	if ns == "" {
		return nil
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("spec.destination.namespace: %q is not a namespace name (%s): name a namespace such as demo, or leave it empty for the resource's own",
			wording.Cut(ns, 80, "..."), strings.Join(errs, "; "))
	}
	return nil
}

// applyStage applies objects in order, stopping at nothing but the
// reconcile's deadline: every object gets its chance and every failure is
// reported. It returns how many objects it went through.
func (e *Engine) applyStage(ctx context.Context, pass *Pass, objs []*planned) int {
	for i, p := range objs {
		if destination.OutOfTime(ctx) != nil {
			return i
		}
		octx := ctx
		if pass.Target.Cluster != destination.LocalCluster {
			// A remote cluster may be a server of the tenant's own: its
			// answers about p are bounded by p's size.
			octx = destination.AnswersAbout(ctx, p.obj, 0)
		}
		if oe := e.syncObject(octx, pass, p); oe != nil {
			pass.Out.Errs = append(pass.Out.Errs, oe)
		}
	}
	return len(objs)
}

// waitEstablished waits briefly for CRDs of this manifest to be served, so
// that their custom resources can be applied in the same reconcile. A CRD
// that takes longer fails this reconcile, which retries with backoff.
func (e *Engine) waitEstablished(ctx context.Context, pass *Pass, crds []*planned) *ObjectError {
	wrote := false
	for _, p := range crds {
		// One in sync whose cached status says Established (Current) has
		// nothing to wait for: a reconcile of objects in sync asks the API
		// server nothing.
		if !p.applied || (!p.wrote && p.health == health.Current) {
			continue
		}
		wrote = wrote || p.wrote
		pctx := ctx
		if pass.Target.Cluster != destination.LocalCluster {
			pctx = destination.AnswersAbout(ctx, p.obj, 0)
		}
		err := wait.PollUntilContextTimeout(pctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			u, err := pass.Target.Client.Resource(p.gvr).Get(ctx, p.obj.GetName(), metav1.GetOptions{})
			if refused := destination.RefusedAnswer(err); refused != nil {
				return false, refused
			}
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
		if refused := destination.RefusedAnswer(err); refused != nil {
			return classify(p, refused)
		}
		if err != nil {
			return &ObjectError{Key: p.key, Index: p.index, Reason: v1alpha1.ReasonWaitingForCRD, Retry: true,
				Err: errors.New("CustomResourceDefinition is not Established yet")}
		}
	}
	// Only a CRD this pass wrote may serve kinds discovery has not seen.
	// Discovery is the cluster's, shared by every resource: a manifest that
	// merely declares a CRD, in sync or refused, must not make every
	// reconcile of it discover the whole cluster again, past the rate
	// limit. A kind missed before its CRD was Established is looked up
	// again at the next rate-limited refresh.
	if wrote {
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
// watched: those of the objects needs selects (see watchNeeded). Informers
// are cluster-wide and label-scoped: one per type serves every resource,
// however many namespaces they write to. With grow, the refs the resource
// tracks already stay tracked: a look before the pass applies anything
// (heldByInventory) only adds, since dropping them until the pass's end
// would free the resource's share of its namespace's informer budget for
// the length of a pass, long enough for another resource of the namespace
// to take it, and this one to be refused its own kinds at the end. It
// returns the registry's refusal, which is also logged.
func (e *Engine) track(ctx context.Context, pass *Pass, objs []*planned, needs func(*planned) bool, grow bool) error {
	seen := map[schema.GroupVersionResource]bool{}
	var refs []watchregistry.Ref
	if grow {
		refs = e.registry.Refs(pass.key)
		for _, ref := range refs {
			if ref.Cluster == pass.Target.Cluster {
				seen[ref.GVR] = true
			}
		}
	}
	objects := make([]WatchedObject, 0, len(objs))
	for _, p := range objs {
		if p.gvr.Empty() {
			continue
		}
		objects = append(objects, WatchedObject{GVR: p.gvr, Namespace: p.obj.GetNamespace(), Name: p.obj.GetName()})
		if seen[p.gvr] || !needs(p) {
			continue
		}
		seen[p.gvr] = true
		refs = append(refs, watchregistry.Ref{Cluster: pass.Target.Cluster, GVR: p.gvr})
	}
	// Before the informers start: their first lists wake the owners of
	// what they find.
	e.wakes.expect(pass.key, pass.VR.UID, pass.Target.Cluster, objects)
	if err := e.registry.Track(pass.key, refs); err != nil {
		klog.FromContext(ctx).Error(err, "Watching managed objects failed; drift is corrected on the interval only")
		return err
	}
	e.wakes.watching(pass.key, pass.VR.UID, pass.Target.Cluster)
	return nil
}

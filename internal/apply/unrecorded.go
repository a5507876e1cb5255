// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"errors"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// The inventory (status.managedResources) is what prunes and the cleanup
// of a deleted resource go by, and it is written after the objects: a
// status write that fails (a conflict, the size limit, the operator killed
// between the two) would forget an object just created, which a later
// manifest that drops it would then never prune. So the inventory a pass
// starts from is a superset of what was written to the cluster:
//
//   - the entries of the passes since the last status write that
//     succeeded, held in memory per resource (unrecorded), and
//   - once per resource and process, and at each change of its spec, the
//     cached objects of the kinds the pass watches that carry the
//     resource's owner-uid label and Vidra's apply, in the namespaces its
//     manifest or inventory names: what a process killed before its status
//     write left, which no memory holds. The caches hold such objects as
//     stubs (no manifest declares them), so these are read from the API
//     server, at most maxStubReads per search.
//
// The extra entries go through the prune's usual checks (the live object's
// owner-uid label and Vidra's apply), so an object that merely carries a
// copy of the marks is left alone.

// maxUnrecorded bounds the entries remembered per resource between a
// status write that failed and the next that succeeds: an inventory is
// bounded by the manifest's objects (1,000) and what it keeps of earlier
// ones, and a pass prunes the extra entries it does not keep. Past it the
// oldest go first, and the cache search of a restarted process is what
// finds them.
const maxUnrecorded = 2000

// maxStubReads bounds the objects one search reads from the API server:
// those the caches hold as stubs, carrying the resource's owner-uid label,
// that neither its manifest nor its inventory names. A resource's own
// forgotten objects are a handful (what one pass created before its status
// write failed); a tenant who copies a resource's label onto thousands of
// objects must not turn its search into thousands of requests.
const maxStubReads = 100

// withUnrecorded returns inventory and the entries of earlier passes on
// cluster that no status write has recorded yet, those last.
func (st *resourceState) withUnrecorded(inventory []v1alpha1.ManagedResource, cluster string) []v1alpha1.ManagedResource {
	if len(st.unrecorded) == 0 || st.unrecordedCluster != cluster {
		// A copy all the same: callers append to it.
		return slices.Clone(inventory)
	}
	have := inventorySet(inventory)
	out := slices.Clone(inventory)
	for _, m := range st.unrecorded {
		if !have[inventoryKey(m)] {
			out = append(out, m)
			have[inventoryKey(m)] = true
		}
	}
	return out
}

// rememberInventory keeps the entries of the inventory a pass leaves that
// the resource's status does not hold yet, until a status write records
// them (Recorded).
func (st *resourceState) rememberInventory(recorded, inventory []v1alpha1.ManagedResource, cluster string) {
	have := inventorySet(recorded)
	var out []v1alpha1.ManagedResource
	for _, m := range inventory {
		if !have[inventoryKey(m)] {
			out = append(out, m)
		}
	}
	if len(out) > maxUnrecorded {
		out = out[len(out)-maxUnrecorded:]
	}
	st.unrecorded, st.unrecordedCluster = out, cluster
}

// Recorded tells the engine that the status holding pass's inventory was
// written (or already held it): the entries it remembered for want of a
// status write are in the inventory now.
func (e *Engine) Recorded(pass *Pass) {
	if len(pass.st.unrecorded) == 0 {
		return
	}
	written := inventorySet(pass.Out.Inventory)
	pass.st.unrecorded = slices.DeleteFunc(pass.st.unrecorded, func(m v1alpha1.ManagedResource) bool { return written[inventoryKey(m)] })
	if len(pass.st.unrecorded) == 0 {
		// Not an empty slice of the old array: every resource's first
		// pass leaves its whole inventory here until its status is
		// written, and the array would stay with the resource, 0.4 MiB at
		// 1,000 resources of four objects.
		pass.st.unrecorded = nil
	}
}

// findUnrecorded searches the caches of the kinds of objs, once per
// resource and process and at each change of its spec, for objects carrying the resource's owner-uid
// label and Vidra's apply that neither the manifest (desired) nor the
// inventory (have) names, in the namespaces those name (and cluster-wide
// for cluster-scoped kinds): what a process killed between an apply and
// its status write created and forgot. A cache that cannot answer yet
// leaves the search for the next pass.
func (e *Engine) findUnrecorded(ctx context.Context, pass *Pass, objs []*planned, desired, have map[ObjectKey]bool) []v1alpha1.ManagedResource {
	// Once per process, and again whenever the spec changed: only a
	// changed manifest makes an object leave it, and a status that lost
	// entries (written over, or restored from a backup) is found then.
	if pass.st.searched && pass.VR.Generation == pass.VR.Status.ObservedGeneration {
		return nil
	}
	s := &unrecordedSearch{pass: pass, desired: desired, have: have,
		owned: labels.SelectorFromSet(labels.Set{v1alpha1.OwnerUIDLabel: string(pass.VR.UID)})}
	namespaces := namespacesOf(desired, have)
	seen := map[watchregistry.Ref]bool{}
	complete := true
	for _, p := range objs {
		if p.gvr.Empty() {
			continue
		}
		ref := watchregistry.Ref{Cluster: pass.Target.Cluster, GVR: p.gvr}
		if seen[ref] {
			continue
		}
		seen[ref] = true
		scopes := []string{""}
		if p.obj.GetNamespace() != "" {
			scopes = namespaces
		}
		for _, ns := range scopes {
			if !e.searchScope(ctx, s, ref, ns) {
				complete = false
				break
			}
		}
	}
	if s.capped {
		klog.FromContext(ctx).Info("More objects carry this resource's marks than one search reads; the rest are looked at after the next change of its spec", "read", maxStubReads)
	}
	pass.st.searched = complete
	return s.found
}

// unrecordedSearch is what one findUnrecorded has found and read so far.
type unrecordedSearch struct {
	pass          *Pass
	owned         labels.Selector
	desired, have map[ObjectKey]bool
	found         []v1alpha1.ManagedResource
	// reads counts the stubs read, up to maxStubReads; capped is set when
	// one more was not.
	reads  int
	capped bool
}

// namespacesOf returns the namespaces, sorted, of the keys of desired and
// have, but the cluster's ("").
func namespacesOf(desired, have map[ObjectKey]bool) []string {
	namespaces := map[string]bool{}
	for k := range desired {
		namespaces[k.namespace] = true
	}
	for k := range have {
		namespaces[k.namespace] = true
	}
	delete(namespaces, "")
	return slices.Sorted(maps.Keys(namespaces))
}

// searchScope looks in ref's cache, in namespace ns, for the objects s
// searches, and reports whether the cache could answer.
func (e *Engine) searchScope(ctx context.Context, s *unrecordedSearch, ref watchregistry.Ref, ns string) bool {
	list, err := e.registry.List(ref, ns, s.owned)
	if errors.Is(err, watchregistry.ErrNotSynced) && e.waitListed(ctx, ref) {
		list, err = e.registry.List(ref, ns, s.owned)
	}
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Looking for objects missing from the inventory failed; trying again next reconcile", "gvr", ref.GVR.String(), "err", err.Error())
		return false
	}
	for _, u := range list {
		k := keyOf(u)
		if s.desired[k] || s.have[k] || !AppliedByVidra(u.GetManagedFields()) {
			continue
		}
		s.have[k] = true
		s.found = append(s.found, managedResource(u))
	}
	// An object no manifest declares is held as a stub (see
	// internal/cachecharge): its marks, not its managedFields, so it is
	// read to be judged. A killed process's objects are exactly such
	// objects.
	stubs, err := e.registry.Stubs(ref, ns, s.owned)
	if err != nil {
		return false
	}
	e.readStubs(ctx, s, ref, stubs)
	return true
}

// readStubs reads the stubs s has not judged yet, up to maxStubReads in
// the search, and keeps those Vidra's apply wrote for this resource.
func (e *Engine) readStubs(ctx context.Context, s *unrecordedSearch, ref watchregistry.Ref, stubs []*unstructured.Unstructured) {
	for _, u := range stubs {
		k := keyOf(u)
		if s.desired[k] || s.have[k] {
			continue
		}
		if s.reads == maxStubReads {
			s.capped = true
			return
		}
		s.reads++
		live, absent, err := e.getLive(ctx, s.pass, &planned{obj: u, gvr: ref.GVR})
		if err != nil || absent || live.GetLabels()[v1alpha1.OwnerUIDLabel] != string(s.pass.VR.UID) || !AppliedByVidra(live.GetManagedFields()) {
			continue
		}
		s.have[k] = true
		s.found = append(s.found, managedResource(live))
	}
}

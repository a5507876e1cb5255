// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package watchregistry

import (
	"sync/atomic"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
)

type clusterClients struct {
	name string
	dyn  dynamic.Interface
	md   metadata.Interface
	// budget, if not nil, is charged with the objects cached by the
	// cluster's informers.
	budget *Budget
	// tripping is claimed by the first charge of an object over the budget
	// (account.add, under the account's lock), so that one goroutine stops
	// the cluster's informers however many objects arrive meanwhile, and
	// reset once they are stopped.
	tripping atomic.Bool
}

// SetCluster adds or replaces the clients of a cluster; "" is the local
// cluster. Replacing a cluster's clients (new credentials, another server)
// stops its informers: their refs turn StateStopped and their owners receive
// EventStateChanged, so that they Track again and get fresh informers on the
// new clients. With MetadataOnly only md is used, otherwise only dyn.
//
// WithBudget bounds the objects the cluster's caches hold (see Budget).
// A cluster that went over its budget stays on hold when its clients are
// replaced: new clients do not make its informers list again any sooner.
func (r *Registry[K]) SetCluster(name string, dyn dynamic.Interface, md metadata.Interface, opts ...ClusterOption) {
	c := &clusterClients{name: name, dyn: dyn, md: md}
	for _, o := range opts {
		o(c)
	}
	r.mu.Lock()
	_, replaced := r.clusters[name]
	r.clusters[name] = c
	var tell []notice[K]
	if replaced {
		tell = r.stopClusterLocked(name, false)
	}
	r.mu.Unlock()
	r.log.V(1).Info("Cluster clients set", "cluster", name, "replaced", replaced, "budget", c.budget != nil)
	r.tell(tell)
}

// RemoveCluster forgets a cluster's clients and stops its informers; their
// owners receive EventStateChanged, and tracking a ref of the cluster fails
// until SetCluster adds it again.
func (r *Registry[K]) RemoveCluster(name string) {
	r.mu.Lock()
	_, known := r.clusters[name]
	delete(r.clusters, name)
	var tell []notice[K]
	if known {
		tell = r.stopClusterLocked(name, false)
	}
	r.mu.Unlock()
	r.log.V(1).Info("Cluster removed", "cluster", name)
	r.tell(tell)
}

// stopClusterLocked stops every informer of the cluster and returns the
// owners to tell. Refs with owners stay bound, as StateStopped, so that
// State and Get explain what happened until the owners track anew. With
// scopeOnly, the informers of refs with a label selector of their own,
// which the registry's scope does not concern, keep running.
func (r *Registry[K]) stopClusterLocked(name string, scopeOnly bool) []notice[K] {
	var tell []notice[K]
	for ref, e := range r.entries {
		if ref.Cluster != name || (scopeOnly && ref.LabelSelector != "") {
			continue
		}
		e.stopLocked(StateStopped, nil)
		if len(e.refs) == 0 {
			delete(r.entries, ref)
			continue
		}
		tell = append(tell, e.notices(nil)...)
		e.log.Info("Informer stopped: its cluster's clients or the label selector changed")
	}
	r.changedLocked()
	return tell
}

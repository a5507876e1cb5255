// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"fmt"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/vidra-operator/vidra/internal/wording"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// setCluster gives the registry the informers' clients of e, charging
// their caches to the budget of the namespace of e's Secret: a tenant
// names as many clusters as it has Secrets, so a budget per cluster would
// bound nothing.
func (r *remotes) setCluster(e *remote, watchDyn dynamic.Interface) {
	ns := e.key.secret.Namespace
	r.mu.Lock()
	b := r.budgets[ns]
	if b == nil {
		objects, bytes := r.guard.CacheBudget()
		b = watchregistry.NewBudget(objects, watchregistry.MaxBytes(bytes), watchregistry.BudgetName(ns))
		r.budgets[ns] = b
	}
	r.mu.Unlock()
	r.registry.SetCluster(e.key.clusterName(), watchDyn, nil, watchregistry.WithBudget(b))
}

// overBudget refuses to work on a cluster of a namespace whose remote
// clusters went over their cache budget, while the informers of the one
// that did are held: nothing would watch its objects, and every reconcile
// would read them all from its server. Any cluster of the namespace, not
// only the held one: a tenant that names the same server through a new
// Secret would otherwise have it listed again at once.
func (r *remotes) overBudget(rk remoteKey) error {
	r.mu.Lock()
	keys := []remoteKey{rk}
	for k := range r.entries {
		if k != rk && k.secret.Namespace == rk.secret.Namespace {
			keys = append(keys, k)
		}
	}
	r.mu.Unlock()
	for _, held := range keys {
		until, err := r.registry.Held(held.clusterName())
		if err == nil {
			continue
		}
		r.wakeAfter(rk, until)
		which := "the cluster at " + held.server
		if held != rk {
			which += fmt.Sprintf(" (Secret %s, key %s), and watches no other cluster of the namespace until then,", held.secret, held.key)
		}
		// A plain error: DestinationUnavailable, retried with backoff, and
		// woken when the hold is over.
		return fmt.Errorf(
			"the remote clusters of namespace %s would make Vidra cache more than %d objects or %s with Vidra's marks that no resource deploying there declares, the most it caches for one namespace (--destination-cache-objects, --destination-cache-size): "+
				"Vidra stopped watching %s and tries again in %s. If it is a Kubernetes API server, keep fewer objects with Vidra's labels on the namespace's remote clusters, or have the operator's administrators raise the limits",
			rk.secret.Namespace, err.Max, wording.Bytes(err.MaxBytes), which, until.Sub(r.clock.Now()).Round(time.Second))
	}
	return nil
}

// wakeAfter requeues the resources of cluster rk when the hold of its
// informers ends, once per hold: their retries back off, and would come
// well after it.
func (r *remotes) wakeAfter(rk remoteKey, until time.Time) {
	r.mu.Lock()
	ctx := r.ctx
	if ctx == nil || r.wakes[rk].Equal(until) {
		r.mu.Unlock()
		return
	}
	r.wakes[rk] = until
	r.mu.Unlock()
	t := r.clock.NewTimer(until.Sub(r.clock.Now()))
	r.wg.Go(func() {
		defer t.Stop()
		select {
		case <-t.C():
		case <-ctx.Done():
			return
		}
		r.mu.Lock()
		if r.wakes[rk].Equal(until) {
			delete(r.wakes, rk)
		}
		r.mu.Unlock()
		r.enqueueUsersOf(rk)
	})
}

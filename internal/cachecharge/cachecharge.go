// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package cachecharge

import (
	"fmt"
	"sync"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// DefaultNamespaceBytes is the default byte budget of one namespace's
// cached objects, over every cluster its resources deploy to: at the usual
// 2 KiB an object takes as cached, some 30,000 objects; at the most a
// ConfigMap can hold, 64 of them. The shipped install gives the operator
// 256 MiB.
const DefaultNamespaceBytes = 64 << 20

// Object is what the charging decision knows of one cached object.
type Object struct {
	// OwnerNamespace is the namespace of the VidraResource the object's
	// marks name, "" when they name none that exists with that UID.
	OwnerNamespace string
	// DeploysHere is whether that resource deploys to the cluster whose
	// cache holds the object (its last reconcile watched there, or, before
	// its first since the operator started, its destination is that
	// cluster).
	DeploysHere bool
	// Declared is whether the resource's manifest, as its last reconcile
	// saw it, or its inventory names the object.
	Declared bool
}

// Decision is how the caches hold the object.
type Decision struct {
	// Stub holds the object's identity and marks only.
	Stub bool
	// Namespace is the namespace whose budget the object held in full is
	// charged to; "" for a stub, which the cluster's stub account pays.
	Namespace string
}

// Decide holds an object in full, charged to its owner's namespace, only
// when its owner exists, deploys to the cluster of the cache, and declares
// it: a tenant can put any marks on objects it may write (another
// tenant's among them, whose UID is no secret), and what it labels costs
// the tenant it names nothing.
func Decide(o Object) Decision {
	if o.OwnerNamespace == "" || !o.DeploysHere || !o.Declared {
		return Decision{Stub: true}
	}
	return Decision{Namespace: o.OwnerNamespace}
}

// Budgets are the byte budgets of the namespaces, one each, created when a
// namespace's object is first charged. Safe for concurrent use.
type Budgets struct {
	maxBytes int64
	mu       sync.Mutex
	byNS     map[string]*watchregistry.Budget
}

// NewBudgets returns budgets of maxBytes per namespace; zero or less means
// DefaultNamespaceBytes.
func NewBudgets(maxBytes int64) *Budgets {
	if maxBytes <= 0 {
		maxBytes = DefaultNamespaceBytes
	}
	return &Budgets{maxBytes: maxBytes, byNS: map[string]*watchregistry.Budget{}}
}

// MaxBytes is the budget of each namespace.
func (b *Budgets) MaxBytes() int64 { return b.maxBytes }

// For returns the budget of namespace ns.
func (b *Budgets) For(ns string) *watchregistry.Budget {
	b.mu.Lock()
	defer b.mu.Unlock()
	bud := b.byNS[ns]
	if bud == nil {
		// Bytes bound it; the object count is bounded by them, each object
		// being charged a few hundred bytes of bookkeeping at least.
		bud = watchregistry.NewBudget(1<<62, watchregistry.MaxBytes(b.maxBytes), watchregistry.BudgetName(ns))
		b.byNS[ns] = bud
	}
	return bud
}

// Exceeded says, when namespace ns's budget had no room for some of its
// objects, which are held as stubs now, how many and what the budget
// holds: the message of the condition its resources carry. ok is false
// when every object of the namespace fits.
func (b *Budgets) Exceeded(ns string) (msg string, ok bool) {
	b.mu.Lock()
	bud := b.byNS[ns]
	b.mu.Unlock()
	if bud == nil || bud.Refused() == 0 {
		return "", false
	}
	return exceededMessage(ns, bud.MaxBytes(), bud.UsedBytes(), bud.Refused()), true
}

func exceededMessage(ns string, maxBytes, used, refused int64) string {
	return fmt.Sprintf("the objects of namespace %s's resources exceed its cache budget of %s (--namespace-cache-size): "+
		"%s are cached, and %d more objects are not; Vidra reads those from the API server at each reconcile. "+
		"Keep the namespace's objects smaller, or have the operator's administrators raise the budget",
		ns, mib(maxBytes), mib(used), refused)
}

func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

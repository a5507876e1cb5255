// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"errors"
	"fmt"

	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// watchNeeded decides which of a pass's objects need their kind watched: an
// object the pass applied (created, changed, or found in sync, create-only
// ones included) or that the resource's inventory holds. A kind whose every
// apply was refused starts no informer: a manifest may name as many kinds
// as it likes, and an informer costs the operator memory and goroutines
// whether or not the resource may write anything of its kind.
func watchNeeded(p *planned) bool { return p.applied || p.inventory }

// heldByInventory is watchNeeded before anything is applied: the kinds the
// inventory holds, whose caches the pass reads.
func heldByInventory(p *planned) bool { return p.inventory }

// tooManyKinds turns a Track the watch registry refused over its informer
// budget into the resource's failure, which names the bound and its
// number; nil for any other error. A namespace's own bound is not retried:
// only its resources, declaring fewer kinds, bring it back under. The
// bounds of a cluster and of the operator are shared: a retry may find
// room once others leave.
func tooManyKinds(err error) *ObjectError {
	var be *watchregistry.InformerBudgetError
	if !errors.As(err, &be) {
		return nil
	}
	var msg string
	retry := true
	switch be.Scope {
	case watchregistry.ScopeTenant:
		retry = false
		msg = fmt.Sprintf("the resources of namespace %s would have Vidra watch %d kinds, more than the %d a namespace may (--max-informers-per-namespace): declare fewer kinds in the namespace's resources",
			be.Name, be.Need, be.Limit)
	case watchregistry.ScopeCluster:
		msg = fmt.Sprintf("the destination cluster would need %d informers, one per kind watched, more than the %d Vidra runs for one cluster (--max-informers-per-cluster): declare fewer kinds, or wait for other resources to let some go",
			be.Need, be.Limit)
	default:
		msg = fmt.Sprintf("Vidra would need %d informers, one per kind and cluster watched, more than the %d it runs in all (--max-informers): declare fewer kinds, or wait for other resources to let some go",
			be.Need, be.Limit)
	}
	return &ObjectError{Index: -1, Reason: v1alpha1.ReasonTooManyKinds, Retry: retry,
		Err: errors.New(msg + "; the objects of kinds not watched yet have their drift corrected on the interval only")}
}

// manifestKinds counts the kinds a manifest names, each group and kind
// once, across API versions.
func manifestKinds(objs []manifest.Object) int {
	type groupKind struct{ group, kind string }
	seen := map[groupKind]bool{}
	for _, o := range objs {
		gvk := o.Object.GroupVersionKind()
		seen[groupKind{manifest.StoredGroup(gvk.Group, gvk.Kind), gvk.Kind}] = true
	}
	return len(seen)
}

// checkManifestKinds refuses, before anything is applied, a manifest that
// alone names more kinds than its namespace may have watched (limit, 0 for
// no bound): it could never be watched whole, and applying its objects
// first would have each of its reconciles write them all, for a failure.
func checkManifestKinds(objs []manifest.Object, limit int) *ObjectError {
	n := manifestKinds(objs)
	if limit <= 0 || n <= limit {
		return nil
	}
	return &ObjectError{Index: -1, Reason: v1alpha1.ReasonTooManyKinds, Err: fmt.Errorf(
		"the manifest names %d kinds, more than the %d Vidra watches for a namespace (--max-informers-per-namespace): nothing was applied; declare fewer kinds",
		n, limit)}
}

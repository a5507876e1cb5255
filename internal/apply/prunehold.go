// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// A failing object of the manifest holds back only the prunes it could be
// confused with: the inventory entries of its kind and name, in any
// namespace and any API group. Those are the objects it may be moving from
// (a ConfigMap moved to another namespace or document, a kind served by a
// new group): deleting the old one while the new one fails would leave
// neither. Every other object that left the manifest is pruned, whatever
// fails: one object that someone else can break (a tenant making a shared
// ConfigMap immutable) must not keep a RoleBinding the manifest dropped.
//
// A failure that is no object's (the manifest does not parse, a kind's
// scope is unknown so its objects cannot be keyed, the destination stopped
// answering) leaves the desired set unknown: it holds every prune, so
// that a manifest half read never prunes what the unread half declares.

// PruneHold is an inventory entry whose prune a failure holds back.
type PruneHold struct {
	// Object is the entry held, as messages name it.
	Object string
	// By names the failing object it could be confused with, or says
	// which failure leaves the desired set unknown.
	By string
	// All: the failure holds every prune, not this one alone.
	All bool
}

// maxHoldsNamed bounds the held prunes a message names; the count says
// how many there are.
const maxHoldsNamed = 5

// holdsEverything reports a failure that leaves the desired set unknown,
// or the destination unable to answer: not one object's.
func holdsEverything(e *ObjectError) bool {
	return !e.ForObject() || e.Reason == v1alpha1.ReasonDestinationError || e.Reason == v1alpha1.ReasonReconcileTimeout
}

// decideHolds returns, of the inventory entries that left the manifest
// (leaving), those whose prune a failure of errs holds back, each with
// the first failure that holds it. Errors of prunes (Index -1 with an
// object) hold nothing: they concern objects already leaving.
func decideHolds(leaving []ObjectKey, errs []*ObjectError) map[ObjectKey]PruneHold {
	held := map[ObjectKey]PruneHold{}
	if len(leaving) == 0 {
		return held
	}
	for _, e := range errs {
		if holdsEverything(e) {
			why := e.Reason
			if e.Err != nil {
				why = wording.Cut(e.Message(), 200, "...")
			}
			for _, k := range leaving {
				if _, ok := held[k]; !ok {
					held[k] = PruneHold{Object: k.String(), By: why, All: true}
				}
			}
			return held
		}
	}
	for _, e := range errs {
		if e.Index < 0 {
			continue
		}
		for _, k := range leaving {
			if _, ok := held[k]; ok || !confusable(k, e.Key) {
				continue
			}
			held[k] = PruneHold{Object: k.String(), By: describeKey(e.Key)}
		}
	}
	return held
}

// confusable reports whether the inventory entry left may be the object
// failing moved: the same kind and name, wherever it is.
func confusable(left, failing ObjectKey) bool {
	return left.kind == failing.kind && left.name == failing.name
}

// describeKey names an object with its group when it has one, since a
// kind and name may be served by two groups.
func describeKey(k ObjectKey) string {
	if k.group != "" {
		k.kind += "." + k.group
	}
	return k.String()
}

// HeldMessage says how many prunes are held back and why, naming at most
// maxHoldsNamed of them; "" when none is.
func HeldMessage(holds []PruneHold) string {
	if len(holds) == 0 {
		return ""
	}
	n := len(holds)
	if holds[0].All {
		names := make([]string, 0, min(n, maxHoldsNamed))
		for _, h := range holds[:min(n, maxHoldsNamed)] {
			names = append(names, h.Object)
		}
		return fmt.Sprintf("%s held back until every object of the manifest is known and the destination answers (%s): %s%s",
			wording.Count(n, "prune"), holds[0].By, strings.Join(names, ", "), more(n))
	}
	parts := make([]string, 0, min(n, maxHoldsNamed))
	for _, h := range holds[:min(n, maxHoldsNamed)] {
		parts = append(parts, fmt.Sprintf("%s (%s fails, and may be it moved)", h.Object, h.By))
	}
	return fmt.Sprintf("%s held back while an object of the same kind and name fails: %s%s",
		wording.Count(n, "prune"), strings.Join(parts, ", "), more(n))
}

func more(n int) string {
	if n <= maxHoldsNamed {
		return ""
	}
	return fmt.Sprintf(" and %d more", n-maxHoldsNamed)
}

// sortedHolds lists holds in the order of the inventory, for messages that
// do not change from one reconcile to the next.
func sortedHolds(inventory []v1alpha1.ManagedResource, held map[ObjectKey]PruneHold) []PruneHold {
	out := make([]PruneHold, 0, len(held))
	for _, m := range inventory {
		if h, ok := held[inventoryKey(m)]; ok {
			out = append(out, h)
		}
	}
	return slices.Clip(out)
}

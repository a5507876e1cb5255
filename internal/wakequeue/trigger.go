// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakequeue

import "slices"

// Trigger is what woke a reconcile. It is recorded beside the work item,
// which stays a bare key.
type Trigger string

// Triggers. When several woke one reconcile, it counts under the most
// significant.
const (
	TriggerRequested Trigger = "requested"
	TriggerEvent     Trigger = "event"
	TriggerStartup   Trigger = "startup"
	TriggerRetry     Trigger = "retry"
	TriggerInterval  Trigger = "interval"
	// TriggerHealth: a managed object's health changed, or a wait for
	// health timed out.
	TriggerHealth Trigger = "health"
	// TriggerDependency: a VidraResource this one depends on became Ready,
	// or stopped being Ready.
	TriggerDependency Trigger = "dependency"
	// TriggerRebalance: this replica of a sharded operator took on a new
	// share of the VidraResources.
	TriggerRebalance Trigger = "rebalance"
)

// order is the precedence of triggers, most significant first.
var order = [...]Trigger{TriggerRequested, TriggerEvent, TriggerDependency, TriggerHealth, TriggerStartup, TriggerRebalance, TriggerRetry, TriggerInterval}

// Significance orders triggers: lower is more significant.
func Significance(t Trigger) int {
	if i := slices.Index(order[:], t); i >= 0 {
		return i
	}
	return len(order)
}

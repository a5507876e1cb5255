// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package wakequeue is the controller's work queue, which knows why each
// key was queued. client-go's rate-limited queue holds bare keys; beside
// them this queue records the causes (Trigger) a key was added for and when
// each is due, so that a reconcile is counted, logged and paced under what
// woke it: a retry that comes back after its backoff is a retry, not the
// event that happened to wake the key meanwhile.
//
// Its storage is fair between namespaces (one FIFO each, the namespace with
// the fewest reconciles in flight first) and every retry is rate-limited per
// key (200ms doubling to 5m) and per namespace (a token bucket each), so
// that one tenant's backlog or failures do not make another's resources
// wait.
package wakequeue

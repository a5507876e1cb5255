// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package shard divides VidraResources between the replicas of a sharded
// operator, with Kubernetes itself as the only coordinator.
//
// Each replica is a member: it holds a coordination.k8s.io Lease of its own
// in the operator's namespace, renewed like a leader-election lease. The
// live members form a view; every VidraResource falls into one of Buckets
// buckets (a hash of its namespace and name), and each bucket belongs to
// one member of the view, chosen by rendezvous (highest-random-weight)
// hashing, so a member that joins or leaves moves only the buckets it
// gains or held.
//
// Handoff is safe without a consensus of its own: a member that sees a new
// view first waits for its reconciles under the old one to end, then
// publishes the view's hash on its Lease; a member reconciles only while
// every member of its view has published that view. No key is therefore
// reconciled by two members at once. A member that cannot renew its Lease
// stops reconciling before the others may count it gone (its renew
// deadline is shorter than the Lease duration), so a member that dies
// loses its buckets to the others within the Lease duration.
package shard

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package guard bounds what a remote destination can make Vidra do. A
// tenant chooses the server of a remote destination, which may be its own:
// without the guard, Vidra would carry requests from inside the cluster to
// any address it can reach, and read whatever that server sends.
//
// A Guard is built once from a Config (the operator's flags) and gives each
// remote cluster a Cluster: the transports of its request, informer and
// discovery clients. What they hold it to, one concept a file:
//
//   - dial.go: the server URL (https unless allowed) and the address it
//     resolves to when dialled (outside the deny list), never a proxy.
//   - answer.go, bounds.go, status.go: an answer that is not a Kubernetes
//     API server's is replaced, never quoted; one over its bound in bytes
//     or JSON values fails; a Status is cut to what a person reads.
//   - stream.go, jsonscan.go: a watch stream is followed byte by byte and
//     ended at an event over its bound, before client-go buffers it.
//   - pools.go, discovery.go, lists.go: what the clusters of one namespace
//     hold together (watch bytes and pace, discovery values, one list at
//     a time), since a tenant names as many clusters as it likes.
//   - limits.go: the numbers, each with the measurement behind it.
//
// Errors are typed; callers decide on RefusedAnswer, OverLimit and
// IsDeniedAddress, never on messages.
package guard

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package destination resolves where a VidraResource's objects go, and as
// whom: the local cluster or a remote one, with the operator's identity or
// an impersonated ServiceAccount.
//
// Resolve decides the identity first (--trusted-namespaces, the resource's
// spec.serviceAccountName, the operator's default ServiceAccount), so that a
// resource that may not act contacts nothing. A remote destination comes
// from a kubeconfig Secret (remote.go): Secrets are watched metadata-only
// (remote_secrets.go), their kubeconfigs accepted only when self-contained
// (remote_kubeconfig.go), their clients held to the Guard (package guard:
// dial-time address checks, answer bounds, per-namespace pools), and each
// remote credential has a circuit breaker (remote_breaker.go). Clients and RESTMappers are built once per cluster
// and identity and reused; the watch registry is told of every cluster.
//
// Errors are typed, so that callers decide on predicates (IsRefused,
// IsSecretGone, IsUnreachable, Failure) rather than on messages.
package destination

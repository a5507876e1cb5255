// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package securemetrics guards the operator's /metrics endpoint the way the
// API server guards a non-resource URL, for operators run with
// --metrics-secure. Metric labels name tenants' namespaces, so whoever
// reaches the pod network must not read them: the endpoint speaks TLS only
// (TLSConfig: a certificate from a directory such as a cert-manager Secret,
// or one generated in memory at start), and Authorizer lets a request
// through only with a bearer token whose identity, per a TokenReview, may
// get the path, per a SubjectAccessReview. Both reviews go to the API
// server, so the scraper's rights are ordinary RBAC: a binding to the
// install's vidra-metrics-reader ClusterRole.
//
// Every request may come from a hostile client, so what one can make the
// operator do is bounded: decisions are cached by a SHA-256 of the token, in
// two bounded LRUs so that a flood of made-up tokens cannot push out the
// scraper's decision, and at most a few reviews run at once; past that, a
// request waits briefly and is then refused with 503 rather than queued
// without end.
package securemetrics

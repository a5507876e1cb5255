// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nsbucket keeps a token bucket per namespace. The operator shares
// its work queue's retries and its Events between tenants, and a tenant is
// a namespace: one tenant's burst must spend its own tokens, not everyone's,
// as one shared bucket would make it. Buckets of namespaces that went quiet
// are dropped, so that namespaces come and go without piling up.
package nsbucket

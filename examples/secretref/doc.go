// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package secretref is a small operator built on watchregistry the way an
// operator outside Vidra would build it, in a module of its own that
// imports only the registry's module. A ConfigMap names Secrets of its
// namespace in the annotation example.com/secrets ("db,tls"); whenever one
// of them is created, changed or deleted, the ConfigMap is reconciled, and
// the operator records what it saw in the annotation example.com/seen
// ("db=<resourceVersion>,tls=absent").
//
// The ConfigMaps come from a client-go informer; the Secrets, which the
// operator does not own, from a watchregistry.Registry in metadata-only mode
// (no Secret data is cached), with watchregistry.Interests mapping each
// Secret to the ConfigMaps that name it: the operator keeps no index.
package secretref

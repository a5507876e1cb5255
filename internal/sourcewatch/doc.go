// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sourcewatch wakes a VidraResource when an object its manifest is
// read from (a ConfigMap or Secret of spec.manifestFrom) is created,
// changed or deleted. Those objects are the users', without Vidra's labels,
// so the watch registry, whose watches select Vidra's label, never sees
// them.
//
// Each object named is watched on its own: a metadata-only watch in its
// namespace with a metadata.name field selector, shared by every resource
// that names it, stopped when the last one stops naming it. The cache holds
// each object's name and resourceVersion, never its content, which the
// apply engine reads on reconcile with the resource's identity. A resource
// names at most v1alpha1.MaxManifestSources objects, so its watches are
// bounded with it.
//
// The operator's own identity watches: it needs list and watch on
// configmaps and secrets (manifests/rbac); the content is never read with it.
package sourcewatch

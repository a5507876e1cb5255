// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package infrahubsync is the InfrahubSync controller: it turns the
// artifacts an Infrahub artifact definition renders into VidraResources, one
// per artifact, named after the artifact's id and owned by the sync, and
// leaves applying them to the VidraResource controller.
//
// A pass asks Infrahub once for the list of artifacts (an ArtifactSource,
// built per sync by a SourceFactory and kept across passes so that it logs
// in once), decides what to do with a pure function (Decide, in plan.go:
// which artifacts to download, which children to write or delete, what to
// report), then does it. Content is downloaded only when Infrahub lists a
// checksum or storage id other than the one the child was written with
// (annotations on the child), so a poll in which nothing changed costs one
// query, no download and no Kubernetes write. Only children whose controller
// ownerReference carries the sync's UID are ever updated or deleted.
//
// Outside the operator's trusted namespaces a sync acts as
// spec.template.serviceAccountName: its credentials Secret is read as that
// ServiceAccount (credentials.go), and without one it contacts nothing.
package infrahubsync

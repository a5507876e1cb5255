// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub

import "context"

// Artifact is one CoreArtifact as a query answered it.
type Artifact struct {
	// ID is the artifact's id, stable across content changes.
	ID string
	// Name is the artifact's name (its definition's artifact_name).
	Name string
	// Checksum is the md5 of the content, exactly as Infrahub gave it.
	Checksum string
	// StorageID is the object-store id of the current content, new on each
	// change; "" when the query selects storage_id { id } (the attribute's
	// id, as the earlier ArtifactIDs query does, which says nothing about
	// the content) or does not select it.
	StorageID string
	// Target is the id of the artifact's target node; "" when the query
	// does not select it.
	Target string
	// ContentType is the artifact's content_type (application/yaml, ...);
	// "" when the query does not select it.
	ContentType string
	// Status is Error, Pending, Processing or Ready; "" when the query does
	// not select it, which means Ready (see Ready).
	Status string
}

// Ready reports whether the artifact's content may be applied: its status
// is Ready, or the query did not select it.
func (a Artifact) Ready() bool { return a.Status == "" || a.Status == StatusReady }

// The artifact statuses of Infrahub.
const (
	StatusReady      = "Ready"
	StatusPending    = "Pending"
	StatusProcessing = "Processing"
	StatusError      = "Error"
)

// Artifacts returns the artifacts src selects, in one request when nothing
// fails: the stored query src.QueryName with the string variable
// artifactname (POST /api/query/{name}?branch=&at=&update_group=false), or
// Vidra's own GraphQL query (POST /graphql/{branch}?at=). A 401 costs at
// most one refresh or login and one more request; a stored query Infrahub
// does not know costs one more request the first time. The answer is
// bounded by Options.MaxResponseBytes; every error is an *Error.
func (c *Client) Artifacts(ctx context.Context, src Source) ([]Artifact, error) {
	return nil, errNotImplemented
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub

import "context"

// Content is an artifact's content as Infrahub served it.
type Content struct {
	// Data is the raw content, at most Options.MaxArtifactBytes.
	Data []byte
	// ContentType is the media type of the answer's Content-Type, without
	// parameters ("" when there was none).
	ContentType string
	// Checksum is the md5 of Data in lower-case hex, Infrahub's own form: a
	// caller may compare it with the Artifact's Checksum, which can differ
	// when the artifact changed between the query and the download.
	Checksum string
}

// Download returns the content of artifact id (GET
// /api/artifact/{id}?branch=&at=, src's branch and at). The body is read up
// to Options.MaxArtifactBytes and refused past it (KindTooLarge) without
// reading the rest, and always closed. Every error is an *Error.
func (c *Client) Download(ctx context.Context, src Source, id string) (Content, error) {
	return Content{}, errNotImplemented
}

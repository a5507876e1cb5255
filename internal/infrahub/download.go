// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"mime"
	"net/http"
	"net/url"

	"k8s.io/apimachinery/pkg/util/validation"
)

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
	if err := c.checkSource(OpDownload, src); err != nil {
		return Content{}, err
	}
	if errs := validation.IsDNS1123Subdomain(id); len(errs) > 0 {
		return Content{}, &Error{Op: OpDownload, Host: c.host, Kind: KindInvalid, detail: "the artifact id is not one Infrahub gives"}
	}
	a, err := c.do(ctx, request{
		op: OpDownload, method: http.MethodGet, path: "/api/artifact/" + url.PathEscape(id), query: sourceQuery(src),
		limit: c.maxArtifact, accept: "*/*",
	})
	if err != nil {
		return Content{}, err
	}
	media, _, err := mime.ParseMediaType(a.header.Get("Content-Type"))
	if err != nil || len(media) > maxFieldBytes {
		media = ""
	}
	sum := md5.Sum(a.body)
	return Content{Data: a.body, ContentType: media, Checksum: hex.EncodeToString(sum[:])}, nil
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package standin is a stand-in Infrahub for tests and `make run`: an HTTP
// server that speaks the part of Infrahub's HTTP contract an InfrahubSync
// uses, with the real paths, answers, error envelopes and status codes of
// Infrahub 1.2 to 1.11, and counts every request so that a test can assert
// "one query, zero downloads".
//
// # What it serves
//
//   - POST /api/auth/login (users set with AddUser): HS256 JWTs, the access
//     token short-lived as Options.AccessLifetime says; an unknown user 404,
//     a bad password 401, a malformed body 422 with FastAPI's detail.
//   - POST /api/auth/refresh with the refresh token as bearer: a new access
//     token; POST /api/auth/logout ends the session.
//   - X-INFRAHUB-KEY with an API token set with AddToken, which wins over a
//     JWT. An expired access token gets 401 "Expired Signature"; a token
//     signed before RotateSecret, 401 "Invalid token". GET passes
//     anonymously unless Options.DenyAnonymous; an anonymous POST gets 403.
//   - POST /api/query/{name}?branch=&at=&update_group= (and GET with the
//     variables as query parameters): the stored queries, the earlier
//     operator's ArtifactIDs by default (AddStoredQuery, DeleteStoredQuery);
//     variables must be strings. An unknown query 404, an unknown branch
//     400, a GraphQL error 502 with Infrahub's envelope.
//   - POST /graphql and /graphql/{branch}?at=: queries of CoreArtifact,
//     answered with exactly the fields they select (attributes as
//     { value } or { id }, relations as { node { ... } }), filtered by
//     name__value(s), definition__name__value(s), ids and
//     object__ids, paginated by offset and limit. An unknown branch 404
//     with plain-string errors; any other query 200 with errors.
//   - GET /api/artifact/{id}?branch=&at= (the content, with its content
//     type) and GET /api/storage/object/{storage_id}.
//
// Branches hold versioned artifacts: SetArtifact stores content under an id,
// computing its md5 checksum and a new storage id whenever the content
// changes (an unchanged content changes nothing, as in Infrahub);
// DeleteArtifact removes one, as Infrahub 1.11 does when its target leaves
// the definition's group. "at" is accepted as Infrahub parses it and
// checked, but answers always show the current state.
//
// # Faults
//
// Fault injects failures into the next answers of one endpoint: a status
// (429 with Retry-After, 502, 503, ...), a delay, or a body that is 50 MiB
// long or never ends. RotateSecret invalidates every token, as a restart of
// Infrahub without a fixed secret key does.
//
// # Later
//
// Options.OnArtifactChange is told of every created or changed artifact:
// the seam through which the stand-in will send Infrahub's artifact
// webhooks.
package standin

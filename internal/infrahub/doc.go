// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package infrahub is Vidra's client of Infrahub (OpsMill's source-of-truth
// database), written to the HTTP contract of Infrahub 1.2 to 1.11: it lists
// the artifacts an artifact definition rendered, and downloads one artifact's
// content. It knows nothing of Kubernetes objects; the InfrahubSync
// controller decides what to ask and what to do with the answers.
//
// # Using it
//
// Build the outbound HTTP client once per operator with NewHTTPClient (the
// same guards as remote destinations: https unless allowed, the CIDR deny
// list checked when dialling, no proxy, no redirects, a private CA if the
// sync names one), then a Client per Infrahub server and credentials with
// New. Keep the Client between reconciles: it holds its tokens, logs in once,
// refreshes an expired access token and logs in again only when Infrahub
// refuses the refresh. A Client is safe for concurrent use.
//
// Each poll calls Artifacts once (one request when nothing fails), compares
// each Artifact's Checksum (exactly as Infrahub gave it) and StorageID with
// what was last applied, and calls Download only for the artifacts that
// changed. Neither call retries beyond the one refresh or login that a 401
// calls for: the caller backs off, outside its worker, using
// Error.Retryable and Error.RetryAfter.
//
// # Errors
//
// Every failure of a call is an *Error with a Kind, the HTTP status and,
// for 429 and 503, Retry-After. Its Error() text is Vidra's own words,
// naming the status and what to check; it never quotes what the server
// sent, so it may go into status conditions and Events. For logs,
// Error.LogKeysAndValues gives the body's length and a short escaped
// excerpt.
//
// # Bounds
//
//	what                                                  default  option
//	one call (login, query, download), dial to last byte  10 s     Options.Timeout
//	a query's or login's answer                           4 MiB    Options.MaxResponseBytes
//	an artifact's content (what spec.manifest holds)      1 MiB    Options.MaxArtifactBytes (the operator sets 768 KiB, the CRD's bound on spec.manifest)
//	an error answer, read to classify it                  64 KiB   -
//	an answer's headers                                   64 KiB   -
//	a private CA bundle                                   128 KiB  MaxCABytes
//	one field of an artifact (name, checksum, ...)        1 KiB    -
//	pages of one query answer                             100      -
//	Retry-After reported                                  1 hour   -
//
// An answer over its bound is refused when the bound is reached (or at once
// when Content-Length says so); the rest is never read.
//
// # Decisions
//
//   - No redirect is followed, to https or not: Infrahub's API does not
//     redirect, and Go would carry X-INFRAHUB-KEY to any host a redirect
//     names. A redirect is a KindBadAnswer.
//   - A private CA (HTTPOptions.CAPEM) replaces the system roots: the sync
//     says who signs its Infrahub.
//   - A stored query Infrahub answers 404 for is not asked again for an
//     hour (Vidra's own query answers meanwhile); a person who creates it
//     is heard within the hour.
//   - Artifact ids must be DNS-1123 subdomains (Infrahub's are UUIDs): each
//     names a VidraResource and goes into a URL path. An answer naming an
//     artifact twice, or with a field over 1 KiB, is a KindBadAnswer.
//   - Artifact.Target is the target node's id, stable and bounded, not its
//     display label.
//   - Login is lazy (the first call) and happens again only when a refresh
//     is refused or a token is invalid ("Invalid token": Infrahub's key
//     changed); a 401 costs one renewal and one more try, never a loop.
//
// # Time
//
// Source.At is Infrahub's "at": ValidateAt accepts what Infrahub reads
// unambiguously (RFC 3339, an ISO date, or a relative 45s, 30m, 2h meaning
// that long ago) and refuses what it would refuse or misread (now+2h, which
// Infrahub reads as two hours ago; days, which it does not support).
package infrahub

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package manifestfrom reads the parts of a VidraResource's manifest that
// live outside it: the ConfigMaps and Secrets spec.manifestFrom names, and
// spec.manifest itself when it is gzip+base64. A VidraResource is one value
// in etcd and cannot hold a bundle with a large CRD (Argo CD's
// ApplicationSet CRD alone is 1.5 MB); its objects go into ConfigMaps,
// gzip-compressed, and the resource names them.
//
// Fetch reads the references with a client acting as the resource's
// identity and returns their content as stored, with its SHA-256, which is
// what the apply engine keys its parse cache by: nothing is decompressed
// or parsed for a content it parsed before. Assemble decompresses and joins
// the parts into one manifest within Budget bytes: the parser's bound
// (manifest.MaxManifestBytes) applies to the sum of every part, and gzip
// data is expanded at most MaxRatio times its size, so a gzip bomb is
// refused when it reaches the bound, never expanded whole.
//
// Every failure is an *Error naming the reference, with a constant reason
// and whether a retry may help (a reference missing or unreadable may
// appear; a bomb will not shrink).
package manifestfrom

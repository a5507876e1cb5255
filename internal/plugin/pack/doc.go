// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package pack turns local YAML and JSON files into the spec.manifest of a
// VidraResource, so that nobody writes YAML inside YAML by hand.
//
// Read expands the paths a person gives (a directory stands for its *.yaml,
// *.yml and *.json files, in lexical order, not recursively, as kubectl -f
// reads a directory) and Pack joins the files into one multi-document
// manifest. Every file is validated on its own with internal/manifest, the
// parser the operator runs, so that an error names the file, the document
// within it and the line, where the author can find it; objects declared
// twice across files are refused as the operator would refuse them. YAML
// files are kept as written, comments included; JSON files (an object, an
// array or a List) are turned into YAML documents, as a YAML manifest cannot
// hold a JSON array.
//
// The package is pure: it reads files and never talks to an API server.
package pack

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package manifest turns the spec.manifest string of a VidraResource into the
// objects to apply, in the order to apply them, or into errors a person can
// act on. It is pure logic: it never talks to an API server.
//
// A reconcile uses it in three steps:
//
//	objs, errs := manifest.Parse(vr.Spec.Manifest)         // syntax and shape of each document
//	objs, rerrs := manifest.Resolve(objs, namespace, scope) // namespaces, duplicates, unknown kinds
//	manifest.Sort(objs)                                     // Stage 0 (Namespaces, CRDs) first
//
// Parse accepts multi-document YAML and JSON (an object, an array of objects,
// a v1 List or any *List kind, which are flattened into their items). It
// reports every problem of every document at once rather than stopping at
// the first, each as an *Error with the document's index, a line of the
// manifest, the field and a constant reason (ReasonInvalidManifest and the
// like) fit for a condition. Resolve needs the scope of each kind, which the
// caller gives as a ScopeFunc wrapping a RESTMapper; kinds defined by a
// CustomResourceDefinition of the same manifest take the scope it declares.
// Its ReasonUnknownKind and ReasonDiscoveryFailed errors are worth retrying
// with backoff (ErrorList.Transient tells), while every other reason needs
// the manifest to be fixed.
//
// Both return the objects that are fine alongside the errors. A caller may
// apply those, but must not prune while there is any error: a manifest that
// is empty, unparsable or half-valid never means "delete the rest". Parse
// refuses an empty manifest outright for the same reason.
//
// Documents are counted from 0 in the order they appear; empty documents
// (only comments, or nothing between two "---") do not count, and each item
// of a List counts as one document. Lines count from 1. See Object for the
// details.
package manifest

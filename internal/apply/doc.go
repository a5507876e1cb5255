// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package apply is Vidra's server-side-apply engine: it brings the objects
// of one VidraResource on its destination to the manifest, and lets go of
// those that left it.
//
// A Pass is one reconcile's work on one resource. Apply parses the manifest
// (cached per generation, parsecache.go), resolves kinds and namespaces,
// marks each object with its owner (marks.go), applies CRDs and Namespaces
// before the rest, tells the watch registry what to watch, and prunes what
// left the inventory (prune.go). Each object is read from the watch
// registry's caches; a pure decision (decide.go) chooses one action from
// what was read, the engine's record and the object's policy; object.go
// executes it and settle.go records how it ended. An object is written only
// when it differs from the manifest (compare.go) or carries a hand edit,
// which is taken back exactly from its managed fields (managedfields.go),
// per spec.ignore (ignore.go) and the object's annotations
// (annotations.go); an object in the way is
// adopted only when its marks' owner is gone and Vidra applied it
// (owner.go). Leave and Cleanup let go of every object
// of a resource, when its destination moved or it is deleted.
//
// Between passes the Engine remembers, per resource, what it applied, which
// objects are in the way, who keeps changing them back (state.go), and
// which objects of other resources' manifests it owns (claims), so that
// letting go of an object hands it over rather than deleting it from under
// the resource that declares it too, when that resource's identity may
// manage it (handover.go).
//
// Failures are ObjectErrors with the condition reason a person acts on and
// whether a retry may succeed (errors.go); the controller turns a Pass's
// Outcome into status and Events.
package apply

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package preview tells what applying a VidraResource would change on its
// destination, the way kubectl diff does for kubectl apply: by asking the
// API server, never by guessing on the client.
//
// Plan runs, for every object of the manifest, the server-side apply the
// operator would send (the object from apply.Desired, field manager vidra,
// forced as the operator forces its applies) as a dry run (dryRun: All),
// and compares the answer with the live object. Admission, defaulting,
// validation and field ownership are therefore the API server's own. The
// noise that changes on every write (managedFields, resourceVersion,
// generation, timestamps, status) is dropped before comparing, and a
// change is shown as a unified diff of the objects' YAML. Objects of the
// inventory (status.managedResources) that left the manifest are what
// prune would delete, release or refuse, by the same rules as the
// operator. Objects Vidra would not touch (another owner's, or an
// unmarked object of the same name) are reported as conflicts, not
// diffed.
//
// Plan needs a dynamic client acting as the operator would (impersonating
// spec.serviceAccountName) and a RESTMapper; Render and the pure helpers
// (Clean, UnifiedDiff) need nothing and are tested without a cluster.
package preview

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package preview tells what applying a VidraResource would change on its
// destination, the way kubectl diff does for kubectl apply. It decides
// nothing itself: the decisions are the engine's own (apply.Plan, the
// step the operator's apply takes), read through GETs of the API server,
// and preview renders them.
//
// For each write the engine would make (a creation, a change, a hand edit
// taken back) Plan runs the server-side apply the operator would send
// (field manager vidra, forced as the operator forces its applies) as a
// dry run (dryRun: All), and compares the answer with the live object:
// admission, defaulting, validation and field ownership are the API
// server's own. The noise that changes on every write (managedFields,
// resourceVersion, generation, timestamps, status) is dropped before
// comparing, and a change is shown as a unified diff of the objects' YAML.
// Objects of the inventory (status.managedResources) that left the
// manifest are what the engine's prune would delete, release, keep, hold
// back or hand over. Objects Vidra would not touch (another owner's, or an
// unmarked object of the same name) are reported as conflicts, not
// diffed.
//
// Plan needs a dynamic client acting as the operator would (impersonating
// spec.serviceAccountName), a RESTMapper, and a client that lists
// VidraResources; Render and the pure helpers (Clean, UnifiedDiff) need
// nothing and are tested without a cluster.
package preview

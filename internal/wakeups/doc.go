// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package wakeups reads Kubernetes audit logs (JSON lines of
// audit.k8s.io/v1 Events) and tells, for every client of the API server,
// what wakes it up: each stream of requests (one verb on one resource,
// object or selector) gets its period, jitter, burstiness, rate and a cause
// named by a rule that says what it read (a Lease renewal, a watch restart,
// a relist, a RequeueAfter poll, a resync, a status heartbeat, a hot loop,
// two writers fighting), or "unexplained" when no rule fits.
//
// It is pure: Reader turns bytes into Requests (gzip detected, lines
// bounded, malformed lines skipped and counted, the stages of a request
// deduplicated by auditID in a bounded window), Analyzer folds Requests
// into per-client, per-stream statistics in memory bounded by Limits
// whatever the log holds, and Analyzer.Report decides the causes. kubectl
// vidra wakeups (internal/plugin/commands) prints the Report; WritePlot
// draws it as SVG.
package wakeups

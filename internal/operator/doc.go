// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package operator assembles Vidra from its parts: API clients, the
// VidraResource informer, the configuration watcher, the Event recorder and
// the controller. cmd/vidra calls it with flags; end-to-end tests call it
// in-process against a real API server.
package operator

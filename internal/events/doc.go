// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package events records the Events of Vidra's objects through one
// wrapper, Recorder, so that every Event, whoever records it, is cut to the
// same bounded message.
package events

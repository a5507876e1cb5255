// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package wording makes the counts in messages agree: "1 object",
// "3 objects", "it is" or "they are", and cuts text that must fit a limit
// without splitting a character. The operator's conditions and Events
// and the kubectl plugin's output share it, so that they say a count the
// same way.
package wording

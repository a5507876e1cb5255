// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package fakeapply teaches client-go's fake dynamic and metadata clients
// the server-side apply their object trackers lack, for the tests of the
// apply engine and of the controller, which apply through them; it also
// builds the object their fixtures' manifests declare, and reads what
// their fake Event recorder holds.
package fakeapply

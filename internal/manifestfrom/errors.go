// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifestfrom

import "fmt"

// Error is a reference of spec.manifestFrom, or spec.manifest's encoding,
// that could not be read or decoded, with the condition reason it maps to
// and whether a retry may help.
type Error struct {
	// Ref is the reference; zero for spec.manifest or the list as a whole.
	Ref    Ref
	Reason string
	Retry  bool
	Err    error
}

func (e *Error) Error() string {
	if e.Ref == (Ref{}) {
		return e.Err.Error()
	}
	return fmt.Sprintf("spec.manifestFrom %s: %v", e.Ref, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

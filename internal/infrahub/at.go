// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub

import "errors"

// ValidateAt checks s as Infrahub's "at": "" (now), an RFC 3339 time, an
// ISO date (2025-01-01, which Infrahub reads as noon UTC), or a relative
// N s, N m or N h (45s, 30m, 2h), meaning that long ago. It refuses what
// Infrahub would refuse (days, garbage) or misread: Infrahub searches any
// other string for a number and a unit and always means "ago", so now+2h,
// -2d and "in 2h" are refused rather than read as two hours ago.
func ValidateAt(s string) error {
	return errors.New("infrahub: ValidateAt not implemented yet")
}

// ValidateBranch checks s as an Infrahub branch name Vidra may put in a
// URL path: "" (the default branch) or letters, digits and - _ . /, at most
// 250 bytes, not starting or ending with "/" or ".", without "..", "//" or
// "@{".
func ValidateBranch(s string) error {
	return errors.New("infrahub: ValidateBranch not implemented yet")
}

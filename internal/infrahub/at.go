// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// relativeAt is the relative form Vidra accepts: hours, minutes and
// seconds, each at most once and in that order, each a whole number.
// Infrahub searches any string it cannot parse as ISO 8601 for "N h", "N m"
// and "N s" anywhere in it and subtracts them from now: 1.5h would be read
// as 5h, now+2h as two hours ago. Only the strict form means what it says.
var relativeAt = regexp.MustCompile(`^(?:[0-9]+h)?(?:[0-9]+m)?(?:[0-9]+s)?$`)

// maxAtBytes bounds an "at": the longest RFC 3339 time is 35 bytes.
const maxAtBytes = 64

// ValidateAt checks s as Infrahub's "at": "" (now), an RFC 3339 time, an
// ISO date (2025-01-01, which Infrahub reads as noon UTC), or a relative
// N s, N m or N h (45s, 30m, 2h, 1h30m), meaning that long ago. It refuses what
// Infrahub would refuse (days, garbage) or misread: Infrahub searches any
// other string for a number and a unit and always means "ago", so now+2h,
// -2d and "in 2h" are refused rather than read as two hours ago.
func ValidateAt(s string) error {
	switch {
	case s == "":
		return nil
	case len(s) > maxAtBytes:
		return fmt.Errorf("%d bytes is longer than any time Infrahub reads", len(s))
	case relativeAt.MatchString(s):
		// Go reads the strict form as Infrahub does; it also bounds the
		// numbers (Infrahub fails on an hour count past its calendar).
		if _, err := time.ParseDuration(s); err != nil {
			return fmt.Errorf("%q is too far back", s)
		}
		return nil
	case strings.ContainsAny(s, "tz"):
		// Go accepts a lower-case T and Z in RFC 3339; ISO 8601 as Infrahub
		// parses it does not.
		return errors.New(atHelp)
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02"} {
		if _, err := time.Parse(layout, s); err == nil {
			return nil
		}
	}
	return errors.New(atHelp)
}

const atHelp = "want an RFC 3339 time (2025-01-01T10:00:00Z), a date (2025-01-01) or a time ago in hours, minutes and seconds (2h, 30m, 45s, 1h30m); Infrahub supports no days, and reads now+2h as two hours ago"

// maxBranchBytes is Infrahub's bound on a branch name.
const maxBranchBytes = 250

// ValidateBranch checks s as an Infrahub branch name Vidra may put in a
// URL path: "" (the default branch) or letters, digits and - _ . /, at most
// 250 bytes, not starting or ending with "/" or ".", without "..", "//",
// "/." or ".lock" at the end (Infrahub's git-like rules, narrowed to the
// characters that need no escaping in a path).
func ValidateBranch(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > maxBranchBytes {
		return fmt.Errorf("a branch name has at most %d bytes", maxBranchBytes)
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '/') {
			return errors.New("a branch name Vidra asks for has only letters, digits, -, _, . and /")
		}
	}
	switch {
	case strings.HasPrefix(s, "/") || strings.HasPrefix(s, "."):
		return errors.New("a branch name does not start with / or .")
	case strings.HasSuffix(s, "/") || strings.HasSuffix(s, ".") || strings.HasSuffix(s, ".lock"):
		return errors.New("a branch name does not end with /, . or .lock")
	case strings.Contains(s, "..") || strings.Contains(s, "//") || strings.Contains(s, "/."):
		return errors.New("a branch name has no .., // or /.")
	}
	return nil
}

// maxQueryNameBytes bounds a stored query's name.
const maxQueryNameBytes = 253

// validQueryName checks the name of a stored query, which goes into a URL
// path escaped: only "." and ".." would mean something else there.
func validQueryName(s string) error {
	switch {
	case s == "." || s == "..":
		return fmt.Errorf("a stored query is not named %q", s)
	case len(s) > maxQueryNameBytes:
		return fmt.Errorf("a stored query's name has at most %d bytes", maxQueryNameBytes)
	case strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return errors.New("a stored query's name has no control characters")
	}
	return nil
}

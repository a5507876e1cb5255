// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wording

import (
	"strings"
	"unicode/utf8"
)

// MaxMessage bounds the messages of conditions and Events: etcd objects
// have a size limit, and people read only the start anyway.
const MaxMessage = 4096

// Message is s cut to MaxMessage, with "..." where it was cut.
func Message(s string) string { return Cut(s, MaxMessage, "...") }

// Cut returns s as valid UTF-8 of at most n bytes: s itself when it fits,
// else its start and then end (an ellipsis, "..." or "…"), the start cut
// at a character boundary; n must leave room for end. Each run of bytes
// that are not UTF-8 becomes U+FFFD first.
//
// Text that goes into an object's status must be valid UTF-8: JSON, the
// form the API server stores, turns every byte of a character cut in two
// into U+FFFD, so a status read back would never equal the one written,
// and a controller comparing them would write it again on every
// reconcile.
func Cut(s string, n int, end string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	cut := max(n-len(end), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + end
}

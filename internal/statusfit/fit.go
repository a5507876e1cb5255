// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package statusfit

import (
	"encoding/json"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/vidra-operator/vidra/internal/health"
	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// MaxBytes bounds a VidraResource's status as JSON, the form the API
// server stores it in. The resource is stored whole, manifest included, and
// etcd refuses a write over 1.5 MiB: a status over that would fail every
// write for good, the inventory would stop being recorded, and later prunes
// would miss what it lacks. Much of the status comes from others: health
// messages written by the objects' controllers, the fields and field
// managers of hand edits, everything a remote destination's API server
// answers; and JSON writes each '<', '>' and '&' in 6 bytes. 512 KiB leaves
// the rest, 1 MiB, to the manifest (at most v1alpha1.MaxManifestBytes,
// 768 KiB) and the metadata.
const MaxBytes = 512 << 10

// omissionsRoom is kept of MaxBytes for status.omitted, which says
// what was left out to fit the rest.
const omissionsRoom = 256

// Fit keeps st within MaxBytes as JSON and says in st.Omitted
// what it left out. found is the number of objects that differ from the
// manifest, of which st.Drift lists (the controller lists a bounded number). Past the
// limit, the oldest corrections of the drift history go first, as the
// least of what the status says, then the last records of st.Drift, then
// every health message of the inventory is shortened to the same length,
// the longest that fits, down to "…" alone. The inventory's entries stay,
// whatever their size: prunes rely on them. The same status and count
// always fit the same way, so a reconcile that changed nothing finds the
// status it wrote and writes nothing.
func Fit(st *v1alpha1.VidraResourceStatus, found int) {
	st.Omitted = nil
	var om v1alpha1.StatusOmissions
	// Removing an item takes off its bytes and a comma at least; the last
	// one also takes its field's name, which is not counted: what is left
	// may end a little under the limit, never over it.
	over := jsonSize(st) - (MaxBytes - omissionsRoom)
	for n := len(st.DriftHistory); over > 0 && n > 0; n-- {
		over -= jsonSize(st.DriftHistory[n-1]) + 1
		st.DriftHistory = st.DriftHistory[:n-1]
		om.DriftHistory++
	}
	for n := len(st.Drift); over > 0 && n > 0; n-- {
		over -= jsonSize(st.Drift[n-1]) + 1
		st.Drift = st.Drift[:n-1]
	}
	if len(st.DriftHistory) == 0 {
		st.DriftHistory = nil
	}
	if len(st.Drift) == 0 {
		st.Drift = nil
	}
	om.Drift = int32(found - len(st.Drift))
	if over > 0 {
		om.HealthMessages = int32(shortenHealthMessages(st, over))
	}
	if om != (v1alpha1.StatusOmissions{}) {
		st.Omitted = &om
	}
}

// shortenHealthMessages cuts every health message of st's inventory to the
// same number of bytes, the most that takes need bytes off the status's
// JSON (or as many as can be, every message then being "…"), and returns
// how many it cut. The inventory is copied first: it may be another
// status's.
func shortenHealthMessages(st *v1alpha1.VidraResourceStatus, need int) int {
	inv := st.ManagedResources
	sizes := make([]int, len(inv))
	longest := 0
	for i, m := range inv {
		if m.HealthMessage != "" {
			sizes[i] = jsonStringSize(m.HealthMessage)
			longest = max(longest, len(m.HealthMessage))
		}
	}
	shortest := len(health.Ellipsis)
	if longest <= shortest {
		return 0
	}
	// saved is what cutting every message to n bytes takes off; the
	// shorter n, the more.
	saved := func(n int) int {
		s := 0
		for i, m := range inv {
			if len(m.HealthMessage) > n {
				s += sizes[i] - jsonStringSize(wording.Cut(m.HealthMessage, n, health.Ellipsis))
			}
		}
		return s
	}
	// The first length, from the longest down, that saves enough.
	n := longest - 1 - sort.Search(longest-shortest, func(i int) bool { return saved(longest-1-i) >= need })
	n = max(n, shortest)
	inv = slices.Clone(inv)
	cut := 0
	for i := range inv {
		if len(inv[i].HealthMessage) > n {
			inv[i].HealthMessage = wording.Cut(inv[i].HealthMessage, n, health.Ellipsis)
			cut++
		}
	}
	st.ManagedResources = inv
	return cut
}

// jsonSize is the length of v in JSON as encoding/json writes it, which is
// how the API server encodes a custom resource: '<', '>' and '&' are
// written in 6 bytes each.
func jsonSize(v any) int {
	var w countingWriter
	// Encode, not Marshal: the encoder's buffer is reused, and the text is
	// counted, never kept.
	if err := json.NewEncoder(&w).Encode(v); err != nil {
		// Nothing in a status fails to encode; were it to, the API
		// server could not take it either.
		return MaxBytes + 1
	}
	return int(w) - 1 // Encode's newline
}

type countingWriter int

// jsonStringSize is jsonSize(s), quotes included, counted without writing
// it: shortenHealthMessages weighs each message at several lengths. It
// escapes as encoding/json does (TestJSONSizeCountsEscapes).
func jsonStringSize(s string) int {
	n := len(`""`)
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"', b == '\\', b == '\b', b == '\f', b == '\n', b == '\r', b == '\t':
				n += len(`\n`)
			case b < ' ', b == '<', b == '>', b == '&':
				n += len(`\u003c`)
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			n += len(`\ufffd`)
		} else {
			n += size
		}
		i += size
	}
	return n
}

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"fmt"
	"unicode/utf8"

	"github.com/vidra-operator/vidra/internal/manifest"
)

// maxInventoryNameBytes bounds what the inventory's entries take as JSON
// for naming their objects. The status limit leaves the entries out (prunes
// rely on every one), and 1,000 entries of the longest valid names take
// about 0.75 MiB; but a tenant's own API server accepts any name, as do
// kinds whose names are only path segments, and JSON writes each <, > and &
// in 6 bytes: 1,000 names of 253 of them took 1.5 MB, past etcd's limit, so
// that every status write failed and no inventory was recorded.
const maxInventoryNameBytes = 768 << 10

// checkInventoryNames refuses a manifest whose objects would name
// themselves in more than maxInventoryNameBytes of the inventory.
func checkInventoryNames(objs []manifest.Object) error {
	total := 0
	for _, o := range objs {
		u := o.Object
		// The keys, quotes and separators of an entry's four names.
		total += 56 + jsonStringBytes(u.GetAPIVersion()) + jsonStringBytes(u.GetKind()) +
			jsonStringBytes(u.GetNamespace()) + jsonStringBytes(u.GetName())
	}
	if total > maxInventoryNameBytes {
		return fmt.Errorf("the manifest's objects would take %d KiB of the status's inventory to name (as JSON, which writes each <, > and & in 6 bytes), more than the %d KiB a status holds for them: use shorter names, or split the objects over several VidraResources",
			total>>10, maxInventoryNameBytes>>10)
	}
	return nil
}

// jsonStringBytes is the length of s as encoding/json writes it, without
// its quotes: what the API server stores.
func jsonStringBytes(s string) int {
	n := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\' || b == '\n' || b == '\r' || b == '\t' || b == '\b' || b == '\f':
				n += 2
			case b < 0x20 || b == '<' || b == '>' || b == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6 // \ufffd
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

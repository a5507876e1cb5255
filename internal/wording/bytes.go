// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wording

import "fmt"

// Bytes writes a limit of n bytes as people read it: "8 MiB", "64 KiB",
// "1000 bytes".
func Bytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

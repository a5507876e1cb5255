// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wording

import "strconv"

// Count says n of noun: "1 object", "3 objects". Nouns whose plural is not
// noun+"s" are not used in messages.
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// Agree picks the form that agrees with a count of n: one for 1, else many.
func Agree(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

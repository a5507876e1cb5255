// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wording

import "strings"

// ListSeparator separates the items of a list in a message: the errors of
// the objects of a reconcile, the objects whose health is not Current, the
// fields other managers contend for.
const ListSeparator = "; "

// List joins items with ListSeparator, each made free of it first ("; "
// within an item becomes ", "), so that a reader splitting the message
// (kubectl vidra why and tree do) finds exactly the items joined. An item
// may quote text a tenant or its API server chose, such as an admission
// webhook's refusal or an object's condition message: "; " in it would
// otherwise add an item, naming any object with any problem.
func List(items []string) string {
	var b strings.Builder
	for i, s := range items {
		if i > 0 {
			b.WriteString(ListSeparator)
		}
		b.WriteString(strings.ReplaceAll(s, ListSeparator, ", "))
	}
	return b.String()
}

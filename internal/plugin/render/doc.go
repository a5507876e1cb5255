// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package render turns VidraResources into what kubectl vidra prints for
// a person: the table of get, the tree of a resource and its objects, and
// the explanation of why, in kubectl's conventions (upper-case headers,
// columns aligned by cli-runtime's tab writer, ages as kubectl writes
// them, colours only when asked for, on a terminal).
//
// It is pure: every function takes the objects and the current time and
// writes text, so that it is tested without a cluster. The structured
// forms behind the text (Tree, Explanation) are what -o json and -o yaml
// print. Safe (safe.go) escapes, in the text, every rune of what the
// cluster sent that a terminal would act on; EscapeJSON and JSONToYAML
// (structured.go) do the same in JSON and YAML, as escapes of their own
// syntax, so that the output still reads back as the value.
package render

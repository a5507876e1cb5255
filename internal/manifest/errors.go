// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vidra-operator/vidra/internal/wording"
)

// Reasons of an Error. They are constant so that they can serve as the reason
// of a status condition and of an Event, and so that callers can tell a
// manifest that must be fixed by a person from one that may work on a retry.
const (
	// ReasonInvalidManifest means that the manifest cannot be parsed, that a
	// document is not a well-formed object, or that the manifest holds no
	// objects. Only an edit of the manifest fixes it.
	ReasonInvalidManifest = "InvalidManifest"
	// ReasonManifestTooLarge means that the manifest is over
	// MaxManifestBytes, holds more than MaxObjects objects, or more
	// documents than Parse reads.
	ReasonManifestTooLarge = "ManifestTooLarge"
	// ReasonUnknownKind means that the destination does not serve the
	// object's kind, typically because its CustomResourceDefinition is not
	// installed yet. It may resolve itself, so callers retry with backoff.
	ReasonUnknownKind = "UnknownKind"
	// ReasonDiscoveryFailed means that the scope of a kind could not be
	// looked up for another reason than the kind being unknown (discovery
	// unreachable or failing). It is transient, so callers retry with
	// backoff.
	ReasonDiscoveryFailed = "DiscoveryFailed"
	// ReasonDuplicateObject means that the same object (API group, kind,
	// namespace and name) appears more than once in the manifest.
	ReasonDuplicateObject = "DuplicateObject"
	// ReasonNamespaceNotAllowed means that a cluster-scoped object carries a
	// namespace.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
)

// maxErrorsInMessage bounds how many errors ErrorList.Error spells out: its
// text ends up in a condition message, which the API server caps at 32768
// bytes, and a person fixes the first errors first anyway.
const maxErrorsInMessage = 20

// Error is one problem of a manifest, located so a person can find it.
type Error struct {
	// Index is the 0-based index of the document (see Object.Index), -1 when
	// the problem is not tied to one document.
	Index int
	// Line is the 1-based line of the manifest the problem is on, or where
	// its document starts; 0 when unknown.
	Line int
	// Field is the path of the offending field, such as "metadata.name" or
	// `metadata.labels["app"]`; empty when the problem is not about a field.
	Field string
	// Reason is one of the Reason constants.
	Reason string
	// Message says what is wrong, for a person.
	Message string

	// err is the error this one was caused by, if any (the ScopeFunc's error
	// for UnknownKind and DiscoveryFailed), so that errors.Is and
	// meta.IsNoMatchError see through an Error.
	err error
}

// Error returns the error located in the manifest, such as
// `document 3 (line 14): metadata.name: required` for Index 2. Messages
// number documents from 1, as an editor counts them and as lines are
// numbered; see DocumentNumber.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Index >= 0 && e.Line > 0:
		fmt.Fprintf(&b, "document %d (line %d): ", DocumentNumber(e.Index), e.Line)
	case e.Index >= 0:
		fmt.Fprintf(&b, "document %d: ", DocumentNumber(e.Index))
	case e.Line > 0:
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap returns the error this one was caused by, or nil.
func (e *Error) Unwrap() error { return e.err }

// ErrorList is every problem found in a manifest, in manifest order (as Parse
// and Resolve return it).
type ErrorList []*Error

// Error returns the errors joined as a list (wording.List). Past the first 20 it only
// counts the rest, so that the text fits in a condition message; the list
// itself always holds every error.
func (l ErrorList) Error() string {
	parts := make([]string, 0, min(len(l), maxErrorsInMessage+1))
	for i, e := range l {
		if i == maxErrorsInMessage {
			parts = append(parts, "and "+strconv.Itoa(len(l)-i)+" more errors")
			break
		}
		parts = append(parts, e.Error())
	}
	return wording.List(parts)
}

// Reason returns the reason of the first error, for a condition; "" when the
// list is empty.
func (l ErrorList) Reason() string {
	if len(l) == 0 {
		return ""
	}
	return l[0].Reason
}

// Transient tells whether every error of the list may go away without an
// edit of the manifest (ReasonUnknownKind, ReasonDiscoveryFailed), so that
// the caller retries with backoff rather than waiting for a new generation.
// It is false for an empty list.
func (l ErrorList) Transient() bool {
	for _, e := range l {
		if e.Reason != ReasonUnknownKind && e.Reason != ReasonDiscoveryFailed {
			return false
		}
	}
	return len(l) > 0
}

// Err returns the list as an error, or nil when it is empty. Use it rather
// than converting an ErrorList to error directly: an empty list held in an
// error interface is not nil.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Unwrap returns the errors of the list, so that errors.As can find an
// *Error and errors.Is can see the cause of each.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// sortErrors puts errors in manifest order: errors of the whole manifest
// first, then by document, then by line. The sort is stable so that the
// errors of one field keep the order they were found in.
func sortErrors(l ErrorList) {
	slices.SortStableFunc(l, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.Line, b.Line))
	})
}

// DocumentNumber is how messages number the document of index (Object.Index,
// Error.Index): from 1, like lines, since a person counts the first document
// of a file as document 1. Indexes stay 0-based in code.
func DocumentNumber(index int) int { return index + 1 }

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"document, line and field", &Error{Index: 2, Line: 14, Field: "metadata.name", Message: "required"}, "document 3 (line 14): metadata.name: required"},
		{"document without a line", &Error{Index: 0, Message: "no object"}, "document 1: no object"},
		{"line without a document", &Error{Index: -1, Line: 3, Message: "bad"}, "line 3: bad"},
		{"whole manifest", &Error{Index: -1, Message: "manifest holds no objects"}, "manifest holds no objects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestErrorList(t *testing.T) {
	var empty ErrorList
	if empty.Err() != nil {
		t.Errorf("empty ErrorList.Err() = %v, want nil", empty.Err())
	}
	if empty.Reason() != "" {
		t.Errorf("empty ErrorList.Reason() = %q, want empty", empty.Reason())
	}

	_, errs := Parse("apiVersion: v1\nkind: ConfigMap\n---\nkind: 3\n")
	want := "document 1 (line 1): metadata.name: required; " +
		"document 2 (line 4): apiVersion: required; " +
		"document 2 (line 4): kind: must be a string, not a number; " +
		"document 2 (line 4): metadata.name: required"
	if got := errs.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := errs.Reason(); got != ReasonInvalidManifest {
		t.Errorf("Reason() = %q, want %q", got, ReasonInvalidManifest)
	}
	var one *Error
	if !errors.As(errs.Err(), &one) || one != errs[0] {
		t.Errorf("errors.As(Err(), *Error) found %v, want the first error", one)
	}
}

// TestErrorListMessageIsBounded checks that the text of many errors stays
// fit for a condition message.
func TestErrorListMessageIsBounded(t *testing.T) {
	_, errs := Parse(strings.Repeat("just a string\n---\n", 500))
	if len(errs) != 500 {
		t.Fatalf("Parse() reported %d errors, want 500", len(errs))
	}
	msg := errs.Error()
	if !strings.HasSuffix(msg, "; and 480 more errors") {
		t.Errorf("Error() ends with %q, want it to count the errors left out", msg[max(0, len(msg)-40):])
	}
	if diff := cmp.Diff(maxErrorsInMessage+1, strings.Count(msg, "; ")+1); diff != "" {
		t.Errorf("parts of Error() (-want +got):\n%s", diff)
	}
}

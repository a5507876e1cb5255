// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifestfrom

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// DecodeManifest returns spec.manifest's text: the field itself, or with
// encoding gzip+base64 its decompression, within budget bytes.
func DecodeManifest(text string, encoding v1alpha1.ManifestEncoding, budget int) (string, *Error) {
	switch encoding {
	case "":
		return text, nil
	case v1alpha1.ManifestEncodingGzipBase64:
	default:
		return "", &Error{Reason: v1alpha1.ReasonInvalidManifest, Err: fmt.Errorf("spec.manifestEncoding: %q is not an encoding: want gzip+base64 or nothing", encoding)}
	}
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil {
		return "", &Error{Reason: v1alpha1.ReasonInvalidManifest, Err: fmt.Errorf("spec.manifest is not base64 (spec.manifestEncoding is gzip+base64): %w", err)}
	}
	if !IsGzip("", data) {
		return "", &Error{Reason: v1alpha1.ReasonInvalidManifest, Err: errors.New("spec.manifest is not gzip data (spec.manifestEncoding is gzip+base64)")}
	}
	out, err := Decode(".gz", data, budget)
	if err != nil {
		return "", decodeError(Ref{}, "spec.manifest", err, budget)
	}
	return string(out), nil
}

// Assemble returns the manifest of a resource: head (spec.manifest's text)
// and then every part of sources, in order, as YAML documents, decompressed
// where they are gzip, in budget bytes at most.
func Assemble(head string, sources []Source, budget int) (string, *Error) {
	var b strings.Builder
	b.WriteString(head)
	for _, s := range sources {
		for _, p := range s.Parts {
			// The separator starts a new document whatever ended the last
			// (no newline, a comment); its bytes count, as the parser
			// counts them.
			left := budget - b.Len() - len("\n---\n")
			text, err := Decode(p.Key, p.Data, max(left, 0))
			if err != nil {
				return "", decodeError(s.Ref, "key "+p.Key, err, budget)
			}
			b.WriteString("\n---\n")
			b.Write(text)
		}
	}
	return b.String(), nil
}

// decodeError says what Decode refused, of what.
func decodeError(ref Ref, what string, err error, budget int) *Error {
	if errors.Is(err, errOverBudget) {
		return &Error{Ref: ref, Reason: v1alpha1.ReasonManifestTooLarge, Err: fmt.Errorf(
			"%s: with it the manifest is over the limit of %d bytes for spec.manifest and spec.manifestFrom together, decompressed: %w", what, budget, err)}
	}
	reason := v1alpha1.ReasonInvalidManifest
	if errors.Is(err, errOverRatio) {
		reason = v1alpha1.ReasonManifestTooLarge
	}
	return &Error{Ref: ref, Reason: reason, Err: fmt.Errorf("%s: %w", what, err)}
}

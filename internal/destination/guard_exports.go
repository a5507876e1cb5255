// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"context"
	"net/netip"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vidra-operator/vidra/internal/destination/guard"
)

// The guard of remote destinations lives in internal/destination/guard;
// these names keep the callers that configure the resolver (flags, the
// operator, the apply engine) on the resolver's own package.

// Guard limits where remote destinations may lead (guard.Config).
type Guard = guard.Config

// DefaultCacheObjects and DefaultCacheBytes are the default budget of the
// stubs the caches of one namespace's remote clusters hold.
const (
	DefaultCacheObjects = guard.DefaultCacheObjects
	DefaultCacheBytes   = guard.DefaultCacheBytes
)

// ParseCIDRs parses a comma-separated list of CIDRs, as
// --destination-cidr-deny takes them; an empty string is an empty list.
func ParseCIDRs(s string) ([]netip.Prefix, error) { return guard.ParseCIDRs(s) }

// IsDeniedAddress reports whether err says that a dial was refused because
// the address is in the CIDR deny list.
func IsDeniedAddress(err error) bool { return guard.IsDeniedAddress(err) }

// AnswersAbout tells the clients of a remote cluster that the requests
// made with the returned context concern obj (see guard.AnswersAbout).
func AnswersAbout(ctx context.Context, obj *unstructured.Unstructured, size int64) context.Context {
	return guard.AnswersAbout(ctx, obj, size)
}

// RefusedAnswer returns the error in err's chain that refused one answer
// of a remote cluster for what it would make Vidra hold, or nil (see
// guard.RefusedAnswer).
func RefusedAnswer(err error) error { return guard.RefusedAnswer(err) }

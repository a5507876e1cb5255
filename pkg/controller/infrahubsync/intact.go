// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahubsync

import (
	"crypto/md5"
	"encoding/hex"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/vidra-operator/vidra/internal/apply"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// intactCache tells whether a child's manifest is still the content its
// checksum annotation names (Infrahub's checksum is the content's md5), so
// that a hand edit of a child's manifest is taken back at the next poll. A
// child is hashed once per version (resourceVersion), not at every poll.
type intactCache struct {
	mu   sync.Mutex
	seen map[types.UID]intactEntry
}

type intactEntry struct {
	rv string
	ok bool
}

func newIntactCache() *intactCache { return &intactCache{seen: map[types.UID]intactEntry{}} }

// check returns, by name, whether each child's manifest matches its
// checksum; a child whose checksum is not an md5 is left out (taken as
// intact).
func (c *intactCache) check(children map[string]*v1alpha1.VidraResource) map[string]bool {
	out := map[string]bool{}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, vr := range children {
		// The operator's cache holds the manifest's SHA-256, not its
		// text: compare it with the sum the sync wrote beside it.
		if got, stripped := apply.CachedManifestSHA256(vr); stripped {
			if want := vr.Annotations[v1alpha1.ArtifactContentSHA256Annotation]; want != "" {
				out[name] = got == want
			}
			continue
		}
		sum := vr.Annotations[v1alpha1.ArtifactChecksumAnnotation]
		if len(sum) != 32 {
			continue
		}
		if e, ok := c.seen[vr.UID]; ok && e.rv == vr.ResourceVersion {
			out[name] = e.ok
			continue
		}
		h := md5.Sum([]byte(vr.Spec.Manifest))
		ok := hex.EncodeToString(h[:]) == sum
		c.seen[vr.UID] = intactEntry{rv: vr.ResourceVersion, ok: ok}
		out[name] = ok
	}
	return out
}

func (c *intactCache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, uid)
}

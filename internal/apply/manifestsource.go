// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

// The VidraResource informer holds no manifest. A tenant may write up to
// v1alpha1.MaxManifestBytes into each of its resources, and every replica
// of the operator caches every resource for as long as it exists, and
// lists all of them again when it restarts: 200 resources of 1.4 MB held
// 272 MiB, past the install's memory limit, for good. StripManifest takes
// the text out of the informer's copy and leaves in its place what the
// reconcile needs to know without it, its SHA-256 and its length, in an
// annotation of the cached copy alone (cachedManifestAnnotation); the
// manifestSource reads the text again only when the parse cache does not
// hold its parse.
//
// Nothing writes a cached copy back: the finalizer is set with a merge
// patch of the finalizers alone, and the status with a PUT of the status
// subresource, which takes the status from the body and keeps everything
// else of the stored resource (test/security checks that a reconciled
// resource keeps its manifest and carries no such annotation).

// cachedManifestAnnotation holds, in the informer's copy of a VidraResource
// only, "<bytes> sha256:<hex>" of the spec.manifest StripManifest took out.
// The API server never sees it.
const cachedManifestAnnotation = "vidra.infrahub.operators.com/cached-manifest"

// manifestSum is the SHA-256 of a manifest's text: what the parse cache
// knows a text by.
type manifestSum [sha256.Size]byte

// StripManifest replaces vr's spec.manifest, as the VidraResource
// informer's transform receives it, by its length and SHA-256. It may run
// again on what it returned (an informer may transform an object twice),
// which it leaves as it is: a stored resource's manifest is never empty,
// the CRD requires one.
func StripManifest(vr *v1alpha1.VidraResource) {
	if vr.Spec.Manifest == "" {
		return
	}
	sum := sha256.Sum256([]byte(vr.Spec.Manifest))
	if vr.Annotations == nil {
		vr.Annotations = map[string]string{}
	}
	vr.Annotations[cachedManifestAnnotation] = strconv.Itoa(len(vr.Spec.Manifest)) + " sha256:" + hex.EncodeToString(sum[:])
	vr.Spec.Manifest = ""
}

// strippedManifest returns the length and sum StripManifest recorded in
// vr, and whether it did: false for a resource that carries its manifest
// (one read from the API server, or built by a test or a preview).
func strippedManifest(vr *v1alpha1.VidraResource) (size int, sum manifestSum, ok bool) {
	v, found := vr.Annotations[cachedManifestAnnotation]
	if !found || vr.Spec.Manifest != "" {
		return 0, sum, false
	}
	n, hexSum, _ := strings.Cut(v, " sha256:")
	size, err := strconv.Atoi(n)
	b, herr := hex.DecodeString(hexSum)
	if err != nil || herr != nil || len(b) != len(sum) {
		return 0, sum, false
	}
	copy(sum[:], b)
	return size, sum, true
}

// manifestSource gives a pass the parsed manifest of its VidraResource:
// the parse cache's when it holds the parse of the same resource, UID and
// text; otherwise the resource is read from the API server and its
// manifest parsed. An idle operator, and the drift repair of a resource
// reconciled a moment ago, thus send no request for it; a periodic
// re-check of a resource whose parse was evicted sends one GET.
// spec.manifestFrom will add its sources here.
type manifestSource struct {
	parsed *parseCache
	// vidra reads a resource whose manifest the informer does not hold.
	vidra versioned.Interface
}

// objects returns the objects of vr's manifest and the errors found in it.
// vr is the informer's copy, without its manifest, or a whole resource. An
// error is a failure to read the resource, worth a retry; a manifest over
// v1alpha1.MaxManifestBytes is one of the manifest's errors. A resource
// read again may be newer than vr: its manifest then is, and the reconcile
// level-triggered; one of another UID (deleted and created again) is not
// vr's and is refused.
func (s *manifestSource) objects(ctx context.Context, key cache.ObjectName, vr *v1alpha1.VidraResource) ([]manifest.Object, manifest.ErrorList, error) {
	text := vr.Spec.Manifest
	size, sum, stripped := strippedManifest(vr)
	if !stripped {
		size, sum = len(text), sha256.Sum256([]byte(text))
	}
	// Checked before anything is read: a resource stored before the CRD's
	// rule may hold a manifest over it, which costs nothing to refuse.
	if err := checkManifestSize(size); err != nil {
		return nil, manifest.ErrorList{err}, nil
	}
	if objs, errs, ok := s.parsed.get(key, vr.UID, sum); ok {
		return objs, errs, nil
	}
	if stripped {
		if s.vidra == nil {
			return nil, nil, fmt.Errorf("read the manifest of VidraResource %s: no client to read it with", key)
		}
		live, err := s.vidra.InfrahubV1alpha1().VidraResources(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("read the manifest of VidraResource %s: %w", key, err)
		}
		if live.UID != vr.UID {
			return nil, nil, fmt.Errorf("read the manifest of VidraResource %s: the resource of UID %s is gone, %s has UID %s", key, vr.UID, key, live.UID)
		}
		text = live.Spec.Manifest
		if err := checkManifestSize(len(text)); err != nil {
			return nil, manifest.ErrorList{err}, nil
		}
		sum = sha256.Sum256([]byte(text))
	}
	objs, errs := s.parsed.parse(key, vr.UID, sum, text)
	return objs, errs, nil
}

// checkManifestSize refuses a spec.manifest over v1alpha1.MaxManifestBytes
// with the CRD's own message.
func checkManifestSize(size int) *manifest.Error {
	if size <= v1alpha1.MaxManifestBytes {
		return nil
	}
	return &manifest.Error{Index: -1, Field: "spec.manifest", Reason: manifest.ReasonManifestTooLarge,
		Message: fmt.Sprintf("%d bytes, over the limit; it %s", size, v1alpha1.ManifestTooLargeMessage)}
}

// CachedManifestSHA256 returns the hex SHA-256 of the manifest that
// StripManifest took out of vr, and whether it did: what a reader of the
// VidraResource cache compares instead of the text, which it does not hold.
func CachedManifestSHA256(vr *v1alpha1.VidraResource) (string, bool) {
	_, sum, ok := strippedManifest(vr)
	if !ok {
		return "", false
	}
	return hex.EncodeToString(sum[:]), true
}

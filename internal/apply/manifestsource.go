// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/manifest"
	"github.com/vidra-operator/vidra/internal/manifestfrom"
	"github.com/vidra-operator/vidra/internal/sourcewatch"
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
// which it leaves as it is. An empty manifest (one whose objects are all
// in spec.manifestFrom) is left as it is too: there is nothing to strip.
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
//
// With spec.manifestFrom, the referenced ConfigMaps and Secrets are read on
// every pass, with the resource's identity (a GET each, their content as
// stored): the parse is cached under the sum of spec.manifest and of their
// content, so only a change of one of them is decompressed and parsed
// again. Their content never enters the VidraResource cache.
type manifestSource struct {
	parsed *parseCache
	// vidra reads a resource whose manifest the informer does not hold.
	vidra versioned.Interface
	// home reads spec.manifestFrom as the resource; watch is told what each
	// resource reads, to wake it on a change. Either may be nil in tests
	// that use no manifestFrom.
	home  func(context.Context, *v1alpha1.VidraResource) (dynamic.Interface, error)
	watch SourceWatch
}

// SourceWatch wakes a resource when an object its manifest is read from
// changes (sourcewatch.Watcher).
type SourceWatch interface {
	Set(key cache.ObjectName, objs []sourcewatch.Object) error
	Forget(key cache.ObjectName)
}

// read is what a manifestSource found: the objects, the errors of the
// manifest, the references it read, and failures to read or decode them.
type read struct {
	objs    []manifest.Object
	errs    manifest.ErrorList
	applied []v1alpha1.AppliedSource
	fails   []*ObjectError
}

// err is the read's failures as one error, nil without any.
func (r read) err() error {
	errs := make([]error, len(r.fails))
	for i, f := range r.fails {
		errs[i] = f
	}
	return errors.Join(errs...)
}

// objects returns the objects of vr's manifest and the errors found in it.
// vr is the informer's copy, without its manifest, or a whole resource. A
// failure is a failure to read the resource or a source (worth a retry),
// or to decode one; a manifest over v1alpha1.MaxManifestBytes is one of the
// manifest's errors. A resource read again may be newer than vr: its
// manifest then is, and the reconcile level-triggered; one of another UID
// (deleted and created again) is not vr's and is refused.
func (s *manifestSource) objects(ctx context.Context, key cache.ObjectName, vr *v1alpha1.VidraResource) read {
	fail := func(reason string, retry bool, err error) read {
		return read{fails: []*ObjectError{{Index: -1, Reason: reason, Retry: retry, Err: err}}}
	}
	text := vr.Spec.Manifest
	size, sum, stripped := strippedManifest(vr)
	if !stripped {
		size, sum = len(text), sha256.Sum256([]byte(text))
	}
	// Checked before anything is read: a resource stored before the CRD's
	// rule may hold a manifest over it, which costs nothing to refuse.
	if err := checkManifestSize(size); err != nil {
		return read{errs: manifest.ErrorList{err}}
	}
	sources, r := s.readSources(ctx, key, vr)
	if len(r.fails) > 0 {
		return r
	}
	if objs, errs, ok := s.parsed.get(key, vr.UID, combinedSum(sum, vr.Spec.ManifestEncoding, sources)); ok {
		r.objs, r.errs = objs, errs
		return r
	}
	encoding := vr.Spec.ManifestEncoding
	if stripped {
		if s.vidra == nil {
			return fail(v1alpha1.ReasonManifestUnavailable, true, fmt.Errorf("read the manifest of VidraResource %s: no client to read it with", key))
		}
		live, err := s.vidra.InfrahubV1alpha1().VidraResources(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
		if err != nil {
			return fail(v1alpha1.ReasonManifestUnavailable, true, fmt.Errorf("read the manifest of VidraResource %s: %w", key, err))
		}
		if live.UID != vr.UID {
			return fail(v1alpha1.ReasonManifestUnavailable, true, fmt.Errorf("read the manifest of VidraResource %s: the resource of UID %s is gone, %s has UID %s", key, vr.UID, key, live.UID))
		}
		text, encoding = live.Spec.Manifest, live.Spec.ManifestEncoding
		if err := checkManifestSize(len(text)); err != nil {
			r.errs = manifest.ErrorList{err}
			return r
		}
		sum = sha256.Sum256([]byte(text))
	}
	full := text
	if encoding != "" || len(sources) > 0 {
		head, derr := manifestfrom.DecodeManifest(text, encoding, manifest.MaxManifestBytes)
		if derr == nil {
			full, derr = manifestfrom.Assemble(head, sources, manifest.MaxManifestBytes)
		}
		if derr != nil {
			return fail(derr.Reason, derr.Retry, derr)
		}
	}
	r.objs, r.errs = s.parsed.parse(key, vr.UID, combinedSum(sum, encoding, sources), full)
	return r
}

// readSources reads vr's spec.manifestFrom, and tells the watch what to
// wake vr for; it does so before reading, so that a reference missing now
// wakes vr when it appears.
func (s *manifestSource) readSources(ctx context.Context, key cache.ObjectName, vr *v1alpha1.VidraResource) ([]manifestfrom.Source, read) {
	refs, rerr := manifestfrom.Refs(vr.Spec.ManifestFrom)
	if rerr != nil {
		return nil, read{fails: []*ObjectError{{Index: -1, Reason: rerr.Reason, Retry: rerr.Retry, Err: rerr}}}
	}
	if s.watch != nil {
		objs := make([]sourcewatch.Object, len(refs))
		for i, ref := range refs {
			objs[i] = sourcewatch.Object{Resource: ref.Resource(), Namespace: vr.Namespace, Name: ref.Name}
		}
		if err := s.watch.Set(key, objs); err != nil {
			// Refused, not retried: only fewer sources named in the
			// namespace bring it back under, and a change of the spec
			// or the interval's reconcile tries again.
			return nil, read{fails: []*ObjectError{{Index: -1, Reason: v1alpha1.ReasonSourceUnavailable,
				Err: fmt.Errorf("spec.manifestFrom: %w: name fewer ConfigMaps and Secrets (pack more documents in each), nothing was applied", err)}}}
		}
	}
	if len(refs) == 0 {
		return nil, read{}
	}
	if s.home == nil {
		return nil, read{fails: []*ObjectError{{Index: -1, Reason: v1alpha1.ReasonSourceUnavailable, Retry: true,
			Err: errors.New("spec.manifestFrom: no client to read it with")}}}
	}
	client, err := s.home(ctx, vr)
	if err != nil {
		reason, retry := destination.Failure(err)
		return nil, read{fails: []*ObjectError{{Index: -1, Reason: reason, Retry: retry, Err: fmt.Errorf("spec.manifestFrom: %w", err)}}}
	}
	sources, errs := manifestfrom.Fetch(ctx, client, vr.Namespace, refs, manifest.MaxManifestBytes)
	var r read
	for _, e := range errs {
		r.fails = append(r.fails, &ObjectError{Index: -1, Reason: e.Reason, Retry: e.Retry, Err: e})
	}
	if len(r.fails) > 0 {
		return nil, r
	}
	r.applied = make([]v1alpha1.AppliedSource, len(sources))
	for i := range sources {
		r.applied[i] = sources[i].Applied()
	}
	return sources, r
}

// combinedSum is what the parse cache knows a manifest by: the sum of
// spec.manifest alone when it is text and nothing else is read, else the
// sum of its sum, its encoding and every source's sum, in order.
func combinedSum(sum manifestSum, encoding v1alpha1.ManifestEncoding, sources []manifestfrom.Source) manifestSum {
	if encoding == "" && len(sources) == 0 {
		return sum
	}
	h := sha256.New()
	h.Write(sum[:])
	fmt.Fprintf(h, "%d:%s", len(encoding), encoding)
	for _, src := range sources {
		fmt.Fprintf(h, "%s/%s/%s:", src.Kind, src.Name, src.Key)
		h.Write(src.Sum[:])
	}
	var out manifestSum
	h.Sum(out[:0])
	return out
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

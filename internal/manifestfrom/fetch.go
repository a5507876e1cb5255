// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifestfrom

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// Kinds of the objects a reference names.
const (
	KindConfigMap = "ConfigMap"
	KindSecret    = "Secret"
)

var (
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// Ref is one reference of spec.manifestFrom, resolved to a kind.
type Ref struct {
	Kind, Name, Key string
}

// String names the reference as messages do: "ConfigMap bundle key a.yaml".
func (r Ref) String() string {
	if r.Key == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Name + " key " + r.Key
}

// Resource is the API resource of the reference's kind.
func (r Ref) Resource() schema.GroupVersionResource {
	if r.Kind == KindSecret {
		return secrets
	}
	return configMaps
}

// Refs resolves spec.manifestFrom. An entry that sets neither or both
// references (the CRD refuses both) is an error.
func Refs(from []v1alpha1.ManifestSource) ([]Ref, *Error) {
	if len(from) > v1alpha1.MaxManifestSources {
		return nil, &Error{Reason: v1alpha1.ReasonManifestTooLarge, Err: fmt.Errorf(
			"spec.manifestFrom has %d references, more than %d: put more keys in each ConfigMap", len(from), v1alpha1.MaxManifestSources)}
	}
	refs := make([]Ref, 0, len(from))
	for i, s := range from {
		switch {
		case s.ConfigMapRef != nil && s.SecretRef == nil:
			refs = append(refs, Ref{Kind: KindConfigMap, Name: s.ConfigMapRef.Name, Key: s.ConfigMapRef.Key})
		case s.SecretRef != nil && s.ConfigMapRef == nil:
			refs = append(refs, Ref{Kind: KindSecret, Name: s.SecretRef.Name, Key: s.SecretRef.Key})
		default:
			return nil, &Error{Reason: v1alpha1.ReasonInvalidManifest, Err: fmt.Errorf("spec.manifestFrom[%d]: set exactly one of configMapRef and secretRef", i)}
		}
	}
	return refs, nil
}

// Part is one key of a referenced object, as stored.
type Part struct {
	Key  string
	Data []byte
}

// Source is one reference as read: its keys in order, and the SHA-256 of
// their names and content as stored.
type Source struct {
	Ref
	Parts []Part
	Sum   [sha256.Size]byte
}

// Applied is the source as status.manifestFrom records it.
func (s *Source) Applied() v1alpha1.AppliedSource {
	return v1alpha1.AppliedSource{Kind: s.Kind, Name: s.Name, Key: s.Key, SHA256: "sha256:" + hex.EncodeToString(s.Sum[:])}
}

// Fetch reads every reference of namespace with client, which acts as the
// resource's identity, and returns them in order, or the errors of those it
// could not read, each naming its reference. The content as stored is
// bounded by budget in all: text never takes less room than its gzip.
func Fetch(ctx context.Context, client dynamic.Interface, namespace string, refs []Ref, budget int) ([]Source, []*Error) {
	var out []Source
	var errs []*Error
	total := 0
	for _, ref := range refs {
		src, err := fetch(ctx, client, namespace, ref)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, p := range src.Parts {
			total += len(p.Data)
		}
		out = append(out, src)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if total > budget {
		return nil, []*Error{{Reason: v1alpha1.ReasonManifestTooLarge, Err: fmt.Errorf(
			"spec.manifestFrom holds %d bytes, over the limit of %d bytes for a whole manifest", total, budget)}}
	}
	return out, nil
}

func fetch(ctx context.Context, client dynamic.Interface, namespace string, ref Ref) (Source, *Error) {
	obj, err := client.Resource(ref.Resource()).Namespace(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		msg := err.Error()
		switch {
		case apierrors.IsNotFound(err):
			msg = "not found"
		case apierrors.IsForbidden(err):
			msg = "the resource's identity may not read it (grant its ServiceAccount get on it): " + msg
		}
		return Source{}, &Error{Ref: ref, Reason: v1alpha1.ReasonSourceUnavailable, Retry: true, Err: fmt.Errorf("%s", msg)}
	}
	parts, perr := parts(obj, ref)
	if perr != nil {
		return Source{}, perr
	}
	h := sha256.New()
	for _, p := range parts {
		// Length-prefixed, so that moving bytes from one key to the next
		// changes the sum.
		fmt.Fprintf(h, "%d:%s%d:", len(p.Key), p.Key, len(p.Data))
		h.Write(p.Data)
	}
	src := Source{Ref: ref, Parts: parts}
	h.Sum(src.Sum[:0])
	return src, nil
}

// parts returns the keys of obj the reference takes, in order, decoded
// from the base64 the API server writes bytes in.
func parts(obj *unstructured.Unstructured, ref Ref) ([]Part, *Error) {
	all := map[string][]byte{}
	fields := []struct {
		name   string
		base64 bool
	}{{"data", ref.Kind == KindSecret}, {"binaryData", true}}
	for _, f := range fields {
		m, _, err := unstructured.NestedStringMap(obj.Object, f.name)
		if err != nil {
			return nil, &Error{Ref: ref, Reason: v1alpha1.ReasonInvalidManifest, Err: fmt.Errorf("%s: %w", f.name, err)}
		}
		for k, v := range m {
			if !f.base64 {
				all[k] = []byte(v)
				continue
			}
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				return nil, &Error{Ref: ref, Reason: v1alpha1.ReasonInvalidManifest, Err: fmt.Errorf("%s key %s: %w", f.name, k, err)}
			}
			all[k] = b
		}
	}
	if ref.Key != "" {
		b, ok := all[ref.Key]
		if !ok {
			return nil, &Error{Ref: ref, Reason: v1alpha1.ReasonSourceUnavailable, Retry: true, Err: fmt.Errorf("%s %s has no key %s", ref.Kind, ref.Name, ref.Key)}
		}
		return []Part{{Key: ref.Key, Data: b}}, nil
	}
	if len(all) == 0 {
		return nil, &Error{Ref: ref, Reason: v1alpha1.ReasonSourceUnavailable, Retry: true, Err: fmt.Errorf("%s %s holds no key", ref.Kind, ref.Name)}
	}
	out := make([]Part, 0, len(all))
	for _, k := range slices.Sorted(maps.Keys(all)) {
		out = append(out, Part{Key: k, Data: all[k]})
	}
	return out, nil
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/shard"
	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	listers "github.com/vidra-operator/vidra/pkg/generated/listers/infrahub/v1alpha1"
)

// mark returns the object to apply: the manifest's object with Vidra's
// labels and annotation, and without the fields Vidra never manages.
func mark(obj *unstructured.Unstructured, vr *v1alpha1.VidraResource) *unstructured.Unstructured {
	u := obj.DeepCopy()
	// Status belongs to the object's controller; a creationTimestamp (often
	// null in generated manifests) to the API server.
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	l := u.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[v1alpha1.ManagedByLabel] = v1alpha1.ManagedByValue
	l[v1alpha1.OwnerUIDLabel] = string(vr.UID)
	l[v1alpha1.BucketLabel] = shard.BucketLabel(cache.MetaObjectToName(vr))
	u.SetLabels(l)
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[v1alpha1.OwnedByAnnotation] = vr.Namespace + "/" + vr.Name
	u.SetAnnotations(a)
	return u
}

// TrimForCache trims what the watch registry caches, which is most of the
// operator's memory: the last-applied annotation kubectl writes (a full copy
// of the object), Vidra's own managedFields entries (the field set of its
// apply is the manifest: the entry keeps its name, which says that Vidra
// applied the object) and those of status writers. Hand-edit managers keep their field
// sets, which are taken back; every other manager keeps only its name and
// time, for the Conflict message that names a rival writer. The override
// managers are read when an object is cached, so a configuration change
// applies to objects as they next change.
func TrimForCache(u *unstructured.Unstructured, overrides []string) {
	if a := u.GetAnnotations(); a != nil {
		if _, ok := a["kubectl.kubernetes.io/last-applied-configuration"]; ok {
			delete(a, "kubectl.kubernetes.io/last-applied-configuration")
			u.SetAnnotations(a)
		}
	}
	if mf := u.GetManagedFields(); len(mf) > 0 {
		kept := mf[:0]
		for _, e := range mf {
			switch {
			case e.Subresource == "status":
				continue
			case e.Manager == v1alpha1.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply:
				// Its name and operation only: what tells an object Vidra
				// applied from one that merely carries a copy of its marks.
				e = metav1.ManagedFieldsEntry{Manager: e.Manager, Operation: e.Operation}
			case isVidraManager(e.Manager):
				continue
			case slices.Contains(overrides, e.Manager):
			default:
				e.FieldsV1 = nil
			}
			kept = append(kept, e)
		}
		u.SetManagedFields(kept)
	}
}

// AppliedByVidra reports whether an Apply of Vidra's field manager wrote the
// object. Updates under any name, Vidra's own release and handover writes
// included, do not count: they are not what makes an object Vidra's.
func AppliedByVidra(managedFields []metav1.ManagedFieldsEntry) bool {
	return slices.ContainsFunc(managedFields, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == v1alpha1.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply
	})
}

// isVidraManager reports the field managers of Vidra's own writes.
func isVidraManager(name string) bool {
	switch name {
	case v1alpha1.FieldManager, v1alpha1.ReleaseFieldManager, v1alpha1.HandoverFieldManager, v1alpha1.DriftFieldManager,
		v1alpha1.FinalizerFieldManager, v1alpha1.StatusFieldManager:
		return true
	}
	return false
}

// maxOwner bounds the owner an object's owned-by annotation names, as
// messages quote it: a namespace, a slash and a name. The annotation is
// anyone's to write who may write the object.
const maxOwner = 63 + 1 + 253

// ownerName is the owner the owned-by annotation of live names, as
// conditions and Events may quote it: cut to maxOwner bytes and readable.
func ownerName(live *unstructured.Unstructured) string {
	owner := live.GetAnnotations()[v1alpha1.OwnedByAnnotation]
	if owner == "" {
		return "(not named)"
	}
	return wording.Cut(readable(owner), maxOwner, "…")
}

// ownerKey parses an owned-by annotation. ok is false when it cannot name
// a VidraResource at all (no such resource can exist): the annotation is
// anyone's to write, and a name with a slash, say, would make a request
// for another path.
func ownerKey(annotation string) (key cache.ObjectName, ok bool) {
	ns, name, found := strings.Cut(annotation, "/")
	if !found || len(validation.IsDNS1123Label(ns)) > 0 || len(path.IsValidPathSegmentName(name)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return key, false
	}
	return cache.ObjectName{Namespace: ns, Name: name}, true
}

// lastWriter names the field manager, other than Vidra, that wrote the object
// most recently: the one a person must talk to when the writes keep coming.
func lastWriter(live *unstructured.Unstructured) string {
	var who string
	var at time.Time
	for _, e := range live.GetManagedFields() {
		if isVidraManager(e.Manager) || e.Time == nil {
			continue
		}
		if who == "" || e.Time.After(at) {
			who, at = e.Manager, e.Time.Time
		}
	}
	if who == "" {
		return "an unknown writer"
	}
	return boundedManager(who)
}

// MarkedOwner returns the VidraResource the marks of u name, from the
// informer cache, when one of that name has the UID of the owner-uid label.
// Anyone who may label an object can give it Vidra's marks: only a resource
// this installation has, with that UID, counts as its owner.
func MarkedOwner(owners listers.VidraResourceLister, u *unstructured.Unstructured) (*v1alpha1.VidraResource, bool) {
	uid := u.GetLabels()[v1alpha1.OwnerUIDLabel]
	key, ok := ownerKey(u.GetAnnotations()[v1alpha1.OwnedByAnnotation])
	if uid == "" || !ok {
		return nil, false
	}
	vr, err := owners.VidraResources(key.Namespace).Get(key.Name)
	if err != nil || string(vr.UID) != uid {
		return nil, false
	}
	return vr, true
}

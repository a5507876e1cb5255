// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package fakeapply

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/shard"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// AppConfigMap is ConfigMap app of namespace (data key: value, uid
// app-uid, resourceVersion 42), the object the fixtures' manifests declare,
// as the destination holds it; owner, if set, is the VidraResource whose
// marks it carries, written by Vidra's apply as every object it manages.
func AppConfigMap(namespace string, owner *v1alpha1.VidraResource) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": namespace, "name": "app", "uid": "app-uid", "resourceVersion": "42"},
		"data":     map[string]any{"key": "value"},
	}}
	if owner != nil {
		u.SetLabels(map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue, v1alpha1.OwnerUIDLabel: string(owner.UID),
			v1alpha1.BucketLabel: shard.BucketLabel(cache.MetaObjectToName(owner))})
		u.SetAnnotations(map[string]string{v1alpha1.OwnedByAnnotation: owner.Namespace + "/" + owner.Name})
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply}})
	}
	return u
}

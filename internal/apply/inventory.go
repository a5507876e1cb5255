// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// ObjectKey identifies a managed object across API versions of its group.
type ObjectKey struct {
	group, kind, namespace, name string
}

func keyOf(u *unstructured.Unstructured) ObjectKey {
	gvk := u.GroupVersionKind()
	return ObjectKey{group: manifest.StoredGroup(gvk.Group, gvk.Kind), kind: gvk.Kind, namespace: u.GetNamespace(), name: u.GetName()}
}

func (k ObjectKey) String() string {
	if k.namespace == "" {
		return k.kind + " " + k.name
	}
	return k.kind + " " + k.namespace + "/" + k.name
}

// InventoryNames lists the objects of an inventory, for messages.
func InventoryNames(items []v1alpha1.ManagedResource) string {
	names := make([]string, len(items))
	for i, m := range items {
		names[i] = inventoryKey(m).String()
	}
	return strings.Join(names, ", ")
}

func managedResource(u interface {
	GetAPIVersion() string
	GetKind() string
	GetNamespace() string
	GetName() string
}) v1alpha1.ManagedResource {
	return v1alpha1.ManagedResource{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

func inventoryKey(m v1alpha1.ManagedResource) ObjectKey {
	gv, _ := schema.ParseGroupVersion(m.APIVersion)
	return ObjectKey{group: manifest.StoredGroup(gv.Group, m.Kind), kind: m.Kind, namespace: m.Namespace, name: m.Name}
}

func inventorySet(items []v1alpha1.ManagedResource) map[ObjectKey]bool {
	set := make(map[ObjectKey]bool, len(items))
	for _, m := range items {
		set[inventoryKey(m)] = true
	}
	return set
}

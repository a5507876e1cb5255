// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"cmp"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// applyOrder is the order kinds are applied in, the one tools such as Helm
// settled on: first what other objects live in or refer to (namespaces,
// definitions of kinds, priorities, quotas and policies, identities,
// configuration, storage, permissions), then Services (before the workloads
// that the Services' environment variables and DNS serve), workloads, and
// what routes to them. Admission policies and webhooks come last, so that
// they do not start judging objects while the Service and Deployment that
// answer them are not up yet, and do not reject the rest of the manifest.
// Kinds not listed go where the empty GroupKind is.
//
// A kind is matched by API group and kind, so that a custom kind named
// like a built-in one (a "Service" of some other group) is not mistaken for
// it.
var applyOrder = [...]schema.GroupKind{
	{Kind: "Namespace"},
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"},
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"},
	{Kind: "ResourceQuota"},
	{Kind: "LimitRange"},
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"},
	{Group: "policy", Kind: "PodDisruptionBudget"},
	{Kind: "ServiceAccount"},
	{Kind: "Secret"},
	{Kind: "ConfigMap"},
	{Group: "storage.k8s.io", Kind: "StorageClass"},
	{Kind: "PersistentVolume"},
	{Kind: "PersistentVolumeClaim"},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"},
	{Group: "rbac.authorization.k8s.io", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"},
	{Kind: "Service"},
	{Group: "apps", Kind: "DaemonSet"},
	{Kind: "Pod"},
	{Kind: "ReplicationController"},
	{Group: "apps", Kind: "ReplicaSet"},
	{Group: "apps", Kind: "Deployment"},
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"},
	{Group: "apps", Kind: "StatefulSet"},
	{Group: "batch", Kind: "Job"},
	{Group: "batch", Kind: "CronJob"},
	{Group: "networking.k8s.io", Kind: "IngressClass"},
	{Group: "networking.k8s.io", Kind: "Ingress"},
	{Group: "apiregistration.k8s.io", Kind: "APIService"},
	{}, // every kind not listed
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"},
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"},
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"},
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"},
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"},
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"},
}

// crdGroupKind is the kind of CustomResourceDefinitions.
func crdGroupKind() schema.GroupKind {
	return schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
}

// Stage returns the apply stage of an object: 0 for Namespaces and
// CustomResourceDefinitions, 1 for everything else (nil included). Stage 0 is
// applied, and its CustomResourceDefinitions waited for until Established,
// before stage 1, whose objects may live in those namespaces or be of those
// kinds. The API version is not looked at: apiextensions.k8s.io/v1beta1
// CustomResourceDefinitions are stage 0 too.
func Stage(obj *unstructured.Unstructured) int {
	if obj == nil {
		return 1
	}
	switch obj.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Kind: "Namespace"}, crdGroupKind():
		return 0
	}
	return 1
}

// rank returns the position of gk in applyOrder.
func rank(gk schema.GroupKind) int {
	other := -1
	for i, k := range applyOrder {
		if k == gk {
			return i
		}
		if k.Empty() {
			other = i
		}
	}
	return other
}

// Sort sorts objs in place into apply order: by Stage, then by kind along
// applyOrder, then by API group and kind (which only groups kinds applyOrder
// does not list), then by namespace and name. The sort is stable and
// deterministic, so every reconcile applies in the same order.
func Sort(objs []Object) {
	type keyed struct {
		stage, rank           int
		group, kind, ns, name string
		obj                   Object
	}
	keys := make([]keyed, len(objs))
	for i, o := range objs {
		k := keyed{stage: 1, rank: rank(schema.GroupKind{}), obj: o}
		if o.Object != nil {
			gk := o.Object.GroupVersionKind().GroupKind()
			k = keyed{Stage(o.Object), rank(gk), gk.Group, gk.Kind, o.Object.GetNamespace(), o.Object.GetName(), o}
		}
		keys[i] = k
	}
	slices.SortStableFunc(keys, func(a, b keyed) int {
		return cmp.Or(
			cmp.Compare(a.stage, b.stage),
			cmp.Compare(a.rank, b.rank),
			cmp.Compare(a.group, b.group),
			cmp.Compare(a.kind, b.kind),
			cmp.Compare(a.ns, b.ns),
			cmp.Compare(a.name, b.name),
		)
	})
	for i, k := range keys {
		objs[i] = k.obj
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestStage(t *testing.T) {
	tests := []struct {
		name       string
		apiVersion string
		kind       string
		want       int
	}{
		{"Namespace", "v1", "Namespace", 0},
		{"CustomResourceDefinition", "apiextensions.k8s.io/v1", "CustomResourceDefinition", 0},
		{"CustomResourceDefinition of an old version", "apiextensions.k8s.io/v1beta1", "CustomResourceDefinition", 0},
		{"ConfigMap", "v1", "ConfigMap", 1},
		{"Deployment", "apps/v1", "Deployment", 1},
		{"custom kind", "example.com/v1", "Widget", 1},
		{"custom kind named Namespace", "example.com/v1", "Namespace", 1},
		{"ValidatingWebhookConfiguration", "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: named(tt.apiVersion, tt.kind, "", "x")}
			if got := Stage(u); got != tt.want {
				t.Errorf("Stage() = %d, want %d", got, tt.want)
			}
		})
	}
	if got := Stage(nil); got != 1 {
		t.Errorf("Stage(nil) = %d, want 1", got)
	}
}

func TestSort(t *testing.T) {
	tests := []struct {
		name string
		objs []map[string]any
		want []string // "Kind namespace/name"
	}{
		{
			name: "common practice order",
			objs: []map[string]any{
				named("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "", "mutate"),
				named("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "validate"),
				named("networking.k8s.io/v1", "Ingress", "app", "web"),
				named("batch/v1", "CronJob", "app", "nightly"),
				named("batch/v1", "Job", "app", "migrate"),
				named("apps/v1", "StatefulSet", "app", "db"),
				named("apps/v1", "Deployment", "app", "web"),
				named("apps/v1", "ReplicaSet", "app", "rs"),
				named("v1", "Pod", "app", "pod"),
				named("apps/v1", "DaemonSet", "app", "agent"),
				named("v1", "Service", "app", "web"),
				named("rbac.authorization.k8s.io/v1", "RoleBinding", "app", "rb"),
				named("rbac.authorization.k8s.io/v1", "Role", "app", "r"),
				named("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "crb"),
				named("rbac.authorization.k8s.io/v1", "ClusterRole", "", "cr"),
				named("v1", "PersistentVolumeClaim", "app", "data"),
				named("v1", "PersistentVolume", "", "pv"),
				named("storage.k8s.io/v1", "StorageClass", "", "fast"),
				named("v1", "ConfigMap", "app", "conf"),
				named("v1", "Secret", "app", "creds"),
				named("v1", "ServiceAccount", "app", "web"),
				named("v1", "LimitRange", "app", "limits"),
				named("v1", "ResourceQuota", "app", "quota"),
				named("scheduling.k8s.io/v1", "PriorityClass", "", "high"),
				named("example.com/v1", "Widget", "app", "w"),
				named("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com"),
				named("v1", "Namespace", "", "app"),
			},
			want: []string{
				"Namespace /app",
				"CustomResourceDefinition /widgets.example.com",
				"PriorityClass /high",
				"ResourceQuota app/quota",
				"LimitRange app/limits",
				"ServiceAccount app/web",
				"Secret app/creds",
				"ConfigMap app/conf",
				"StorageClass /fast",
				"PersistentVolume /pv",
				"PersistentVolumeClaim app/data",
				"ClusterRole /cr",
				"ClusterRoleBinding /crb",
				"Role app/r",
				"RoleBinding app/rb",
				"Service app/web",
				"DaemonSet app/agent",
				"Pod app/pod",
				"ReplicaSet app/rs",
				"Deployment app/web",
				"StatefulSet app/db",
				"Job app/migrate",
				"CronJob app/nightly",
				"Ingress app/web",
				"Widget app/w",
				"ValidatingWebhookConfiguration /validate",
				"MutatingWebhookConfiguration /mutate",
			},
		},
		{
			name: "same kind by namespace then name",
			objs: []map[string]any{
				named("v1", "ConfigMap", "b", "a"),
				named("v1", "ConfigMap", "a", "z"),
				named("v1", "ConfigMap", "a", "b"),
				named("v1", "Namespace", "", "b"),
				named("v1", "Namespace", "", "a"),
			},
			want: []string{"Namespace /a", "Namespace /b", "ConfigMap a/b", "ConfigMap a/z", "ConfigMap b/a"},
		},
		{
			name: "kinds missing from the table, grouped by group and kind",
			objs: []map[string]any{
				named("z.example.com/v1", "Alpha", "ns", "a"),
				named("example.com/v1", "Widget", "ns", "b"),
				named("example.com/v1", "Gadget", "ns", "c"),
				named("example.com/v1", "Widget", "ns", "a"),
			},
			want: []string{"Gadget ns/c", "Widget ns/a", "Widget ns/b", "Alpha ns/a"},
		},
		{
			name: "a custom kind named like a built-in one is not it",
			objs: []map[string]any{
				named("example.com/v1", "Service", "ns", "custom"),
				named("v1", "Service", "ns", "core"),
				named("v1", "ConfigMap", "ns", "c"),
			},
			want: []string{"ConfigMap ns/c", "Service ns/core", "Service ns/custom"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := make([]Object, len(tt.objs))
			for i, o := range tt.objs {
				objs[i] = Object{Index: i, Object: &unstructured.Unstructured{Object: o}}
			}
			Sort(objs)
			if diff := cmp.Diff(tt.want, kindNames(objs)); diff != "" {
				t.Errorf("Sort() order (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSortIsStable checks that objects Sort cannot tell apart keep their
// order, so that the apply order does not change between reconciles.
func TestSortIsStable(t *testing.T) {
	objs := []Object{
		{Index: 0, Object: &unstructured.Unstructured{Object: named("v1", "ConfigMap", "a", "x")}},
		{Index: 1, Object: &unstructured.Unstructured{Object: named("v1", "ConfigMap", "a", "x")}},
		{Index: 2, Object: &unstructured.Unstructured{Object: named("v1", "Namespace", "", "a")}},
		{Index: 3, Object: &unstructured.Unstructured{Object: named("v1", "ConfigMap", "a", "x")}},
	}
	Sort(objs)
	var got []int
	for _, o := range objs {
		got = append(got, o.Index)
	}
	if diff := cmp.Diff([]int{2, 0, 1, 3}, got); diff != "" {
		t.Errorf("Sort() order of indexes (-want +got):\n%s", diff)
	}
}

// TestSortTestdata sorts the realistic manifests: a webhook after its
// backend, a CRD before its objects.
func TestSortTestdata(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"app.yaml", []string{"Namespace /shop", "ServiceAccount shop/web", "ConfigMap shop/web", "Service shop/web", "Deployment shop/web"}},
		{"crd-and-cr.yaml", []string{"CustomResourceDefinition /widgets.example.com", "Widget /second", "Widget shop/first"}},
		{"webhook.yaml", []string{"Service policy-system/policy", "Deployment policy-system/policy", "ValidatingWebhookConfiguration /policy"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			objs := mustParse(t, string(data))
			Sort(objs)
			if diff := cmp.Diff(tt.want, kindNames(objs)); diff != "" {
				t.Errorf("Sort() order (-want +got):\n%s", diff)
			}
		})
	}
}

// kindNames lists objects as "Kind namespace/name".
func kindNames(objs []Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Object.GetKind()+" "+o.Object.GetNamespace()+"/"+o.Object.GetName())
	}
	return out
}

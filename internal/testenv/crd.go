// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// CRDResource is the GroupVersionResource of CustomResourceDefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs applies the CustomResourceDefinitions in the YAML files and
// waits until each is Established, so that callers can use the new resources
// at once. It goes through the dynamic client to keep the apiextensions
// module out of the operator's dependencies.
func InstallCRDs(ctx context.Context, cfg *rest.Config, files ...string) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var names []string
	for _, file := range files {
		applied, err := applyFile(ctx, dyn, file, func(*unstructured.Unstructured) (schema.GroupVersionResource, error) { return CRDResource, nil })
		if err != nil {
			return err
		}
		names = append(names, applied...)
	}
	for _, name := range names {
		if err := WaitCRDEstablished(ctx, dyn, name, time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// WaitCRDEstablished polls until the named CRD has condition Established=True.
func WaitCRDEstablished(ctx context.Context, dyn dynamic.Interface, name string, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		crd, err := dyn.Resource(CRDResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", name, err)
	}
	return nil
}

// applyFile server-side applies every object of a multi-document YAML file,
// to the resource gvrOf names for it, and returns their names.
func applyFile(ctx context.Context, dyn dynamic.Interface, file string, gvrOf func(*unstructured.Unstructured) (schema.GroupVersionResource, error)) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	var names []string
	for _, doc := range strings.Split(string(data), "\n---") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
			continue
		}
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("decode %s: %w", file, err)
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		gvr, err := gvrOf(u)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		body, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		force := true
		if _, err := dyn.Resource(gvr).Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "testenv", Force: &force}); err != nil {
			return nil, fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		names = append(names, u.GetName())
	}
	return names, nil
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// FinalizerPolicyFile is the MutatingAdmissionPolicy that adds Vidra's
// finalizer on create, relative to the repository root.
const FinalizerPolicyFile = "manifests/admission/finalizer_policy.yaml"

var admissionResources = map[string]schema.GroupVersionResource{
	"MutatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicies"},
	"MutatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicybindings"},
}

// InstallFinalizerPolicy applies FinalizerPolicyFile and waits until it
// acts: admission policies load asynchronously, and until then creates of
// VidraResources go without the finalizer (or are refused for a moment while
// the policy resolves the CRD's kind). The CRD must be installed. It probes
// with VidraResources in namespace "default", which it deletes again.
func InstallFinalizerPolicy(ctx context.Context, cfg *rest.Config) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = applyFile(ctx, dyn, filepath.Join(root, FinalizerPolicyFile), func(u *unstructured.Unstructured) (schema.GroupVersionResource, error) {
		gvr, ok := admissionResources[u.GetKind()]
		if !ok {
			return gvr, fmt.Errorf("unexpected kind %q", u.GetKind())
		}
		return gvr, nil
	})
	if err != nil {
		return err
	}
	return WaitFinalizerPolicy(ctx, cfg, true)
}

// WaitFinalizerPolicy waits until creates of VidraResources get the
// finalizer (active) or no longer do (after the policy was deleted).
func WaitFinalizerPolicy(ctx context.Context, cfg *rest.Config, active bool) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	vrs := dyn.Resource(v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.ResourcePlural)).Namespace("default")
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(),
		"kind":       "VidraResource",
		"metadata":   map[string]any{"generateName": "finalizer-policy-probe-"},
		"spec":       map[string]any{"manifest": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\n"},
	}}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := vrs.Create(ctx, probe, metav1.CreateOptions{})
		if last = err; err != nil {
			return false, nil
		}
		// Nothing runs here that would remove the finalizer.
		if _, err := vrs.Patch(ctx, got.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			return false, fmt.Errorf("release probe %s: %w", got.GetName(), err)
		}
		if err := vrs.Delete(ctx, got.GetName(), metav1.DeleteOptions{}); err != nil {
			return false, fmt.Errorf("delete probe %s: %w", got.GetName(), err)
		}
		return slices.Contains(got.GetFinalizers(), v1alpha1.Finalizer) == active, nil
	})
	if err != nil {
		return fmt.Errorf("finalizer policy active=%v: %w (last create error: %v)", active, err, last)
	}
	return nil
}

// DeleteFinalizerPolicy removes what InstallFinalizerPolicy applied and waits
// until creates no longer get the finalizer.
func DeleteFinalizerPolicy(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, gvr := range admissionResources {
		if err := dyn.Resource(gvr).Delete(ctx, "vidra-finalizer", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s vidra-finalizer: %w", gvr.Resource, err)
		}
	}
	return WaitFinalizerPolicy(ctx, cfg, false)
}

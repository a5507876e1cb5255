// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vidra-operator/vidra/internal/plugin/pack"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// bundleKey is the key of the gzip data in each ConfigMap create writes.
const bundleKey = "manifest.yaml.gz"

// bundleConfigMaps returns the ConfigMaps of vr's manifest split into
// chunks, named <name>-manifest-<n>, and sets vr's spec.manifestFrom to
// them, in order.
func bundleConfigMaps(vr *v1alpha1.VidraResource, chunks []pack.Chunk) ([]*corev1.ConfigMap, error) {
	var cms []*corev1.ConfigMap
	for i, c := range chunks {
		name := vr.Name + "-manifest-" + strconv.Itoa(i)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, fmt.Errorf("ConfigMap name %s: %v: choose a shorter resource name", name, errs)
		}
		cms = append(cms, &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: vr.Namespace, Labels: map[string]string{bundleLabel: vr.Name}},
			BinaryData: map[string][]byte{bundleKey: c.Gzip},
		})
		vr.Spec.ManifestFrom = append(vr.Spec.ManifestFrom, v1alpha1.ManifestSource{ConfigMapRef: &v1alpha1.SourceKeyReference{Name: name, Key: bundleKey}})
	}
	vr.Spec.Manifest = ""
	return cms, nil
}

// bundleLabel names, on a ConfigMap create wrote, the VidraResource it
// holds the manifest of; the ownerReference is what deletes it.
const bundleLabel = "vidra.infrahub.operators.com/manifest-of"

// createBundle creates the ConfigMaps, then the resource, then makes the
// resource the ConfigMaps' owner, so that they go with it: created first,
// they are there when the operator first reconciles the resource. A
// failure to create the resource deletes the ConfigMaps again.
func createBundle(ctx context.Context, kube kubernetes.Interface, create func() (*v1alpha1.VidraResource, error), cms []*corev1.ConfigMap, opts metav1.CreateOptions) (*v1alpha1.VidraResource, error) {
	var made []string
	undo := func() {
		if len(opts.DryRun) > 0 {
			return
		}
		for _, name := range made {
			_ = kube.CoreV1().ConfigMaps(cms[0].Namespace).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
		}
	}
	for _, cm := range cms {
		if _, err := kube.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, opts); err != nil {
			undo()
			return nil, fmt.Errorf("create configmap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		made = append(made, cm.Name)
	}
	vr, err := create()
	if err != nil {
		undo()
		return nil, err
	}
	if len(opts.DryRun) > 0 {
		return vr, nil
	}
	owner := metav1.OwnerReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "VidraResource", Name: vr.Name, UID: vr.UID, Controller: ptr.To(true)}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{owner}}})
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, name := range made {
		if _, err := kube.CoreV1().ConfigMaps(vr.Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
			errs = append(errs, fmt.Errorf("make vidraresource %s the owner of configmap %s (delete it with the resource yourself): %w", vr.Name, name, err))
		}
	}
	return vr, errors.Join(errs...)
}

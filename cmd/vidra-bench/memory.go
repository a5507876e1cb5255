// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/operator"
)

// memoryLimitFlag is the --memory-limit the operator's auto policy would
// choose in a container limited to want ("manifest": the limit of
// manifests/manager/deployment.yaml; "none": no flag). The bench runs the
// operator as a plain process, without the cgroup the policy reads, so it
// hands the operator the limit it would have as installed.
func memoryLimitFlag(root, want string) (string, error) {
	switch want {
	case "none", "":
		return "", nil
	case "manifest":
		q, err := manifestMemoryLimit(root)
		if err != nil {
			return "", err
		}
		want = q.String()
	}
	q, err := resource.ParseQuantity(want)
	if err != nil {
		return "", fmt.Errorf("-container-memory %q: %w", want, err)
	}
	return fmt.Sprintf("--memory-limit=%d", int64(float64(q.Value())*operator.ContainerLimitShare)), nil
}

// manifestMemoryLimit reads the memory limit of the operator's container
// in the install manifests.
func manifestMemoryLimit(root string) (resource.Quantity, error) {
	path := filepath.Join(root, "manifests", "manager", "deployment.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return resource.Quantity{}, err
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(data, &d); err != nil {
		return resource.Quantity{}, fmt.Errorf("%s: %w", path, err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if q, ok := c.Resources.Limits["memory"]; ok {
			return q, nil
		}
	}
	return resource.Quantity{}, fmt.Errorf("%s: no container has a memory limit", path)
}

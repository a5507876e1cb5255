// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package v1alpha1 is version v1alpha1 of the infrahub.operators.com API:
// VidraResource, a set of Kubernetes manifests that Vidra applies to a
// destination cluster and keeps there. The types are the contract with users
// (the CRD in manifests/crd is generated from them) and with Go programs (the
// clients, listers, informers and apply configurations in pkg/generated).
//
// +k8s:deepcopy-gen=package
// +k8s:openapi-gen=true
// +groupName=infrahub.operators.com
package v1alpha1

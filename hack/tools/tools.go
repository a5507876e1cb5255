// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins the development tools built by hack/update-codegen.sh.
package tools

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"

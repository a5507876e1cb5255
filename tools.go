// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools keeps the code generators in go.mod, so that
// hack/update-codegen.sh builds the versions pinned there.
package tools

import (
	_ "k8s.io/code-generator"
	_ "k8s.io/kube-openapi/cmd/openapi-gen"
)

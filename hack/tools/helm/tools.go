// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins helm, which the chart tests (test/chart) lint, render,
// install, upgrade and uninstall the chart with (hack/tools/build.sh builds it).
package tools

import _ "helm.sh/helm/v3/cmd/helm"

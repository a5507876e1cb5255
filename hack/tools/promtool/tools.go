// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins promtool, which checks the alerting rules
// (hack/tools/build.sh builds it; make test runs it).
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"

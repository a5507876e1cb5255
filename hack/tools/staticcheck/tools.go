// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins staticcheck, which make verify runs (hack/verify-staticcheck.sh).
package tools

import _ "honnef.co/go/tools/cmd/staticcheck"

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package infrahub holds the API group infrahub.operators.com; its versions
// live in subpackages.
package infrahub

// GroupName is the API group of Vidra's resources.
const GroupName = "infrahub.operators.com"

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins the etcd server this module builds.
package tools

import _ "go.etcd.io/etcd/server/v3"

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package statusfit keeps a VidraResource's status within a size the API
// server and etcd always accept, whatever the objects' controllers, hand
// edits and remote API servers put into it, and says in status.omitted
// what it left out.
package statusfit

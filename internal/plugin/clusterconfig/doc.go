// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package clusterconfig exports one context of a person's kubeconfig as the
// self-contained kubeconfig a remote destination's Secret holds (kubectl
// vidra cluster add).
//
// The operator reads that Secret inside the cluster, where the person's
// files and credential programs do not exist, and it refuses a kubeconfig
// that would read its own files or run programs. Export therefore keeps
// only the chosen context, its cluster and its user (minified), inlines
// what the person's kubeconfig holds in files (certificate authority,
// client certificate and key, token file), and then runs the operator's
// own check (destination.CheckKubeconfig) on the result, so that a
// credential plugin (exec), an auth-provider or a proxy is refused here,
// with the operator's words, rather than by the operator after the Secret
// is written.
package clusterconfig

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
// the files it names (certificate authority, client certificate and key,
// token file) only when asked to (Options.EmbedFiles; a merged kubeconfig
// may name any file of the machine), and then runs the operator's own
// check (destination.CheckKubeconfig) on the result, so that a credential
// plugin (exec), an auth-provider or a proxy is refused here, with the
// operator's words, rather than by the operator after the Secret is
// written.
//
// The Secret hands the identity to everyone who may read Secrets in its
// namespace. Review asks the destination, as that identity, whether it can
// do what no destination needs (system:masters, * on *, escalate or bind
// ClusterRoles, impersonate users or groups); Decide turns the answer into
// a refusal, or a warning when the person passed --yes.
package clusterconfig

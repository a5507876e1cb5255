// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package commands is kubectl vidra: the cobra commands of the
// kubectl-vidra binary (cmd/kubectl-vidra) and the wiring between kubectl's
// flags (k8s.io/cli-runtime), the project's generated clientset and the
// packages that do the work: render (tables, tree, why), preview (diff by
// server-side dry run), pack (create) and clusterconfig (cluster add).
//
// NewRoot builds the whole command tree from the streams it is given, with
// no state outside it, so that tests can run it like the binary. Errors go
// to the error stream as kubectl writes them ("error: ..."), with a
// non-zero exit code: 1 in general, and for diff kubectl diff's codes (1
// when there are differences, 2 on an error).
package commands

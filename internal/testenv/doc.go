// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package testenv starts a real, throwaway Kubernetes control plane on this
// machine: etcd, kube-apiserver and kube-controller-manager (garbage collector
// and namespace controllers only), built from source by
// hack/controlplane/build.sh.
//
// Every Env gets its own free ports, data directory, etcd prefix and freshly
// generated credentials, so several can run side by side (tests of remote
// destinations start two). Start waits until the API server is ready and the
// default namespace exists, and verifies that the ports it talks to are held by
// its own child processes, so a test can never silently talk to somebody
// else's etcd. Stop tears everything down by PID and removes the temporary
// directory; children are also killed by the kernel if the test binary dies
// (Pdeathsig), and stale directories of dead runs are removed by the next
// Start.
//
// The control plane itself is package
// github.com/vidra-operator/vidra/pkg/watchregistry/controlplane, which the
// registry's module ships for the operators of others; testenv names it for
// Vidra (Name), finds the repository's binaries, and adds what only Vidra's
// tests need: its CRDs, the operator as a process, metrics, tenants.
//
// Tests use it from TestMain through RunMain, one control plane per test
// package, isolating themselves by namespace. hack/localup uses it to give a
// person a control plane and a kubeconfig.
package testenv

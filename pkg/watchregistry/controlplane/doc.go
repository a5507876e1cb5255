// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controlplane starts a throwaway Kubernetes control plane (etcd,
// kube-apiserver with RBAC, and a kube-controller-manager running the
// garbage collector, namespace and ClusterRole-aggregation controllers) for
// tests against a real API server, from a directory of those binaries
// (Options.BinDir, or $VIDRA_CONTROLPLANE_DIR). It needs no container
// runtime, kubelet or test framework: the operators that use watchregistry
// test with it the way the library itself does.
//
//	var env *controlplane.Env
//	func TestMain(m *testing.M) { controlplane.RunMainShort(m, &env, controlplane.Options{}) }
//
//	func TestX(t *testing.T) { cfg := controlplane.Need(t, env); ... }
//
// Each Env has a private directory with fresh credentials and ports, and
// Stop removes it. Env.UserConfig gives a client of any user and groups,
// with a certificate of the Env's CA, for tests of RBAC; StartProcess runs
// an operator as a process of its own, killed with the test binary.
package controlplane

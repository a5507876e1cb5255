// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package reliability holds Vidra's end-to-end reliability tests: the
// operator binary runs as a process of its own against a real control plane
// and is killed with SIGKILL while it converges, loses its API server, and
// hands leadership over, and the tests check that the cluster ends up as
// declared. The tests live in package reliability_test; this file only
// documents the package.
//
// Every test is bounded in time, starts its own operator processes (built
// once, with the race detector, in TestMain) in a namespace of its own, and
// kills them and deletes the namespace when it ends. The random moments of
// the SIGKILL test come from a seed that is logged; set
// VIDRA_RELIABILITY_SEED to replay a run.
package reliability

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Command vidra-bench measures Vidra against the performance targets of SPEC
// §7 on this machine, side by side in one run, against a fresh local control
// plane:
//
//	go run ./cmd/vidra-bench [-n 1000] [-out bench/results] [-skip-baseline]
//
// It starts etcd, kube-apiserver (with an audit log of the operator's
// requests) and kube-controller-manager through internal/testenv, builds
// cmd/vidra and runs it as a separate process under a user name of its own,
// so that the API server's audit log tells its requests apart and /proc tells
// its memory apart. Then, in order:
//
//   - baseline: one `kubectl apply --server-side -f` of a multi-document file
//     holding the same 4·N objects, in namespaces of their own, before the
//     operator starts;
//   - converge: N VidraResources of 4 objects each (ConfigMap,
//     ServiceAccount, Service, Deployment with 0 replicas), one per
//     namespace, until every object exists and every resource is Ready=True;
//   - memory: the operator's RSS (/proc), Go heap (its /metrics) and
//     informers;
//   - idle: the operator's requests per minute by verb, counted in the audit
//     log, and its reconciles per minute, with everything converged;
//   - churn: what 100 status-only updates of managed Deployments cost;
//   - drift: time from an external change to its repair, taken from a watch,
//     per kind of drift, in event mode and in periodic-only mode; and, for
//     resources with driftPolicy Report, the time from a kubectl-edit to
//     the resource's watch event that lists it in status.drift.
//   - health, between the two drift modes (before the periodic-only
//     resources exist, whose re-checks would blur its counts): in resources
//     of their own, each a Deployment of one replica whose status the
//     benchmark writes (no deployment controller runs), what status churn
//     that keeps health costs and the time from a health change to the
//     parent's status showing it; and how fast readiness travels down
//     chains of spec.dependsOn.
//
// It writes latest.json and drift-latency.svg into -out and prints a
// markdown table. bench/README.md explains every figure.
package main

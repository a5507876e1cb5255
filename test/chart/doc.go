// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package chart tests the Helm chart (charts/vidra) and the monitoring that
// ships with it, against one test control plane: helm lint and helm
// template with the default and the hardened values; the chart's objects
// against the kustomize installs' (manifests/, deploy/restricted,
// deploy/sharded), so that the two routes cannot drift apart; helm install,
// upgrade and uninstall; the alerts with promtool test rules; and the
// dashboard's shape and metric names against a live operator's /metrics.
//
// The control plane has no kubelet, so the installed Deployment's pod never
// runs: the tests run the operator binary beside it, as the chart's
// ServiceAccount (bound by the chart's RBAC), with the chart's ConfigMap
// and namespace. What they prove is that the chart's objects are enough for
// the operator; not that the image starts, nor the probes, nor the pod
// security context on a node (docs/operations.md).
//
// helm and promtool are built from the Go module proxy by
// hack/tools/build.sh (make tools) into bin/tools; VIDRA_TOOLS_DIR points
// elsewhere.
package chart

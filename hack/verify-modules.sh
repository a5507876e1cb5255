#!/usr/bin/env bash
# Each nested module (hack/modules.sh) builds and vets on its own, with its
# go.mod and go.sum tidy, and outside Vidra's module: a module importing the
# watch registry must not inherit the operator's dependencies. The modules
# that an operator imports (the registry, and the example operator that
# imports it as an outsider would) have none of the operator's heavy
# dependencies nor Prometheus in their module graph.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOWORK=off
forbidden='^(go\.uber\.org/zap|github\.com/spf13/cobra|k8s\.io/cli-runtime|sigs\.k8s\.io/kustomize|github\.com/prometheus/|github\.com/vidra-operator/vidra) '
fail=0
for m in $(bash hack/modules.sh); do
	(
		cd "$m"
		go mod tidy -diff || { echo "modules: $m: go.mod or go.sum is not tidy (run go mod tidy in $m)" >&2; exit 1; }
		go build ./...
		go vet ./...
		case $m in
		*/promcollector) ;; # the one module that is about Prometheus
		*)
			if bad=$(go list -m all | grep -E "$forbidden"); then
				echo "modules: $m has in its module graph:" >&2
				echo "$bad" >&2
				exit 1
			fi
			;;
		esac
	) || fail=1
done
exit $fail

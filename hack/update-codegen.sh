#!/usr/bin/env bash
# Regenerates everything derived from pkg/apis: deepcopy and register code,
# OpenAPI models, the typed clientset, listers, informers and apply
# configurations in pkg/generated, and the CRD in manifests/crd.
# Generators are built from the versions pinned in go.mod and hack/tools/go.mod
# into bin/codegen (ignored).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
module=github.com/vidra-operator/vidra
boilerplate=hack/boilerplate.go.txt

export GOBIN="$root/bin/codegen"
mkdir -p "$GOBIN"
# A fresh module cache holds nothing that only tools.go imports: download
# the generators' modules first, or `go list` names no directory at all.
go mod download k8s.io/code-generator k8s.io/kube-openapi
codegen_root=$(go list -m -f '{{.Dir}}' k8s.io/code-generator)
if [[ ! -f "$codegen_root/kube_codegen.sh" ]]; then
  echo "hack/update-codegen.sh: k8s.io/code-generator not found in the module cache (go list gave '$codegen_root')" >&2
  exit 1
fi
# shellcheck source=/dev/null
source "$codegen_root/kube_codegen.sh"

kube::codegen::gen_helpers --boilerplate "$boilerplate" pkg/apis
kube::codegen::gen_register --boilerplate "$boilerplate" pkg/apis

kube::codegen::gen_openapi \
  --boilerplate "$boilerplate" \
  --output-dir pkg/generated/openapi \
  --output-pkg "$module/pkg/generated/openapi" \
  --report-filename /dev/null \
  --update-report \
  pkg/apis

schema=$(mktemp)
trap 'rm -f "$schema"' EXIT
go run ./hack/models-schema > "$schema"

kube::codegen::gen_client \
  --boilerplate "$boilerplate" \
  --output-dir pkg/generated \
  --output-pkg "$module/pkg/generated" \
  --with-watch \
  --with-applyconfig \
  --applyconfig-openapi-schema "$schema" \
  pkg/apis

# The CRD comes from the same Go types, so the schema cannot drift from them.
(cd hack/tools && go build -o "$GOBIN/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen)
"$GOBIN/controller-gen" crd:crdVersions=v1 paths=./pkg/apis/... output:crd:dir=./manifests/crd
# The Helm chart installs the same CRDs (test/chart checks them).
rm -f charts/vidra/crds/*.yaml && cp manifests/crd/*.yaml charts/vidra/crds/

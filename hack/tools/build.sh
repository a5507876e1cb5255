#!/usr/bin/env bash
# Builds the tools the tests and checks run, from the Go module proxy, each
# from its own module so that their dependencies never enter the operator's
# go.mod: helm (hack/tools/helm) and promtool (hack/tools/promtool) for the
# chart tests, staticcheck (hack/tools/staticcheck) for make verify, into
# bin/tools/. Like the control plane
# (hack/controlplane/build.sh), the binaries are also kept in a per-user
# cache ($VIDRA_CACHE_DIR, default ~/.cache/vidra) keyed by the module's
# go.sum, so that a fresh clone (CI) copies them instead of building again.
# Usage: hack/tools/build.sh [helm] [promtool] [staticcheck]   (helm and promtool by default)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${VIDRA_TOOLS_DIR:-$root/bin/tools}
cache_root=${VIDRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vidra}/tools
mkdir -p "$out"

version_of() { awk -v m="$2" '$1 == "require" && $2 == m {print $3} $1 == m {print $2}' "$root/hack/tools/$1/go.mod" | head -1; }

build() {
  local name=$1 module pkg ldflags version
  case $name in
    helm)
      module=helm.sh/helm/v3
      pkg=helm.sh/helm/v3/cmd/helm
      version=$(version_of helm "$module")
      # What Helm's release build stamps: its version, and the Kubernetes
      # version helm template and helm lint assume without a cluster.
      local k8s
      k8s=$(awk '$1 == "k8s.io/client-go" {print $2}' "$root/hack/tools/helm/go.mod" | sed 's/^v0\.\([0-9]*\)\..*/\1/')
      ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
      ldflags="$ldflags -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$k8s"
      ldflags="$ldflags -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$k8s"
      ;;
    promtool)
      module=github.com/prometheus/prometheus
      pkg=github.com/prometheus/prometheus/cmd/promtool
      version=$(version_of promtool "$module")
      ldflags="-s -w -X github.com/prometheus/common/version.Version=$version"
      ;;
    staticcheck)
      module=honnef.co/go/tools
      pkg=honnef.co/go/tools/cmd/staticcheck
      version=$(version_of staticcheck "$module")
      ldflags="-s -w"
      ;;
    *) echo "unknown tool $name (helm, promtool, staticcheck)" >&2; return 2 ;;
  esac
  local key cache bin=$out/$name
  key=$(sha256sum "$root/hack/tools/$name/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)
  cache=$cache_root/$name-$version-$key
  if [[ -x $bin && -f $bin.key && $(cat "$bin.key") == "$key" ]]; then
    echo "$name $version already built in ${bin#"$root"/}"
    return
  fi
  if [[ -x $cache/$name ]]; then
    cp "$cache/$name" "$bin.tmp" && mv "$bin.tmp" "$bin" && echo "$key" >"$bin.key"
    echo "$name $version copied from the cache $cache"
    return
  fi
  echo "building $name $version from the Go module proxy; a cold build takes minutes on 2 cores"
  local start=$SECONDS
  (cd "$root/hack/tools/$name" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" "$pkg")
  mkdir -p "$cache"
  cp "$bin.tmp" "$cache/$name.tmp" && mv "$cache/$name.tmp" "$cache/$name"
  mv "$bin.tmp" "$bin" && echo "$key" >"$bin.key"
  echo "$name $version built in $((SECONDS - start))s, cached in $cache"
}

tools=("$@")
[[ ${#tools[@]} -gt 0 ]] || tools=(helm promtool)
# The tools share no module: their cold builds overlap downloads and links.
pids=()
for t in "${tools[@]}"; do
  build "$t" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
if [[ $status -ne 0 ]]; then
  echo "building the tools failed; rerun 'make tools' (it resumes from the Go build cache)" >&2
  exit 1
fi

#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager,
# kubectl) from the Go module proxy into bin/controlplane/<version>/, and does
# nothing when the binaries are already there. The cold build takes minutes, so
# the result is also kept in a per-user cache outside the checkout
# ($VIDRA_CACHE_DIR, default ~/.cache/vidra), keyed by the versions and by a
# hash of the pinned modules (go.sum): a fresh clone on the same machine
# (CI) copies the binaries instead of building them again.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
k8s_version=v1.37.1
etcd_version=$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" {print $3}' "$root/hack/controlplane/etcd/go.mod")
out=${VIDRA_CONTROLPLANE_DIR:-$root/bin/controlplane/$k8s_version}
key=$(cat "$root"/hack/controlplane/*/go.sum | sha256sum | cut -c1-12)
cache=${VIDRA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vidra}/controlplane/$k8s_version-etcd-$etcd_version-$key

want=(etcd kube-apiserver kube-controller-manager kubectl)
missing=()
for b in "${want[@]}"; do
  [[ -x "$out/$b" ]] || missing+=("$b")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  # Seed the shared cache from a tree built before the cache existed.
  if [[ ! -x "$cache/kubectl" ]]; then
    mkdir -p "$cache" && for b in "${want[@]}"; do cp "$out/$b" "$cache/$b.tmp" && mv "$cache/$b.tmp" "$cache/$b"; done
  fi
  echo "control plane $k8s_version (etcd $etcd_version) already built in ${out#"$root"/}"
  exit 0
fi

mkdir -p "$out" "$cache"
for b in "${missing[@]}"; do
  [[ -x "$cache/$b" ]] && cp "$cache/$b" "$out/$b.tmp" && mv "$out/$b.tmp" "$out/$b"
done
missing=()
for b in "${want[@]}"; do
  [[ -x "$out/$b" ]] || missing+=("$b")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "control plane $k8s_version (etcd $etcd_version) copied from the cache $cache"
  exit 0
fi

echo "building control plane $k8s_version (etcd $etcd_version): ${missing[*]}"
echo "  a cold build downloads the modules and compiles for 10 to 25 minutes on 2 cores; progress every minute"

# Stamp versions the way the Kubernetes release build does, so that discovery
# and kubectl version report something meaningful.
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=37 -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37"

stage=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$stage"; kill $(jobs -p) 2>/dev/null || true' EXIT

# The Kubernetes binaries share most of their packages: one `go build` of all
# of them compiles each package once and links the binaries in parallel.
# etcd is its own module and builds beside it.
k8s=()
build_etcd=false
for b in "${missing[@]}"; do
  if [[ $b == etcd ]]; then build_etcd=true; else k8s+=("k8s.io/kubernetes/cmd/$b"); fi
done
start=$SECONDS
pids=()
if $build_etcd; then
  (cd "$root/hack/controlplane/etcd" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$stage/etcd" go.etcd.io/etcd/server/v3 \
    && echo "  etcd built in $((SECONDS - start))s") &
  pids+=($!)
fi
if [[ ${#k8s[@]} -gt 0 ]]; then
  (cd "$root/hack/controlplane/kubernetes" && CGO_ENABLED=0 go build -trimpath -tags providerless -ldflags "$ldflags" -o "$stage/" "${k8s[@]}" \
    && echo "  ${k8s[*]##*/} built in $((SECONDS - start))s") &
  pids+=($!)
fi
# A first-time user must not take a quiet 20 minutes for a hang.
(while sleep 60; do echo "  still building (${missing[*]}): $(((SECONDS - start) / 60))m elapsed"; done) &
ticker=$!
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
kill "$ticker" 2>/dev/null || true
if [[ $status -ne 0 ]]; then
  echo "building the control plane failed; rerun 'make controlplane' (it resumes from the Go build cache)" >&2
  exit 1
fi
for b in "${missing[@]}"; do
  cp "$stage/$b" "$cache/$b.tmp" && mv "$cache/$b.tmp" "$cache/$b"
  mv "$stage/$b" "$out/$b"
done
echo "control plane built in $((SECONDS - start))s into ${out#"$root"/}, cached in $cache"

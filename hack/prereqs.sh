#!/usr/bin/env bash
# Checks what `make run` and `make test` need from the machine before they
# start a long build: a Go toolchain as new as go.mod asks for, the tools the
# scripts call, and (with arguments host:port ...) free listen addresses.
# Says what is missing and how to fix it, and exits non-zero.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
problems=()

if ! command -v go >/dev/null 2>&1; then
  problems+=("Go is not on PATH: install Go $(awk '$1 == "go" {print $2; exit}' "$root/go.mod") or newer (https://go.dev/dl/)")
else
  want=$(awk '$1 == "go" {print $2; exit}' "$root/go.mod")
  have=$(go env GOVERSION | sed 's/^go//')
  # sort -V puts the older of the two first.
  if [[ $(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1) != "$want" ]]; then
    problems+=("Go $have is older than the $want that go.mod asks for: install Go $want or newer, or let GOTOOLCHAIN=auto fetch it")
  fi
fi
for tool in git make bash tar sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || problems+=("$tool is not on PATH: install it with your package manager")
done

for addr in "$@"; do
  port=${addr##*:}
  # /proc/net/tcp{,6} list listening sockets (state 0A) with hex ports; no
  # extra tool needed.
  hex=$(printf '%04X' "$port")
  if awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p {found=1} END {exit !found}' /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
    problems+=("port $port ($addr) is in use: stop what listens there, or choose other addresses, e.g. make run METRICS_ADDR=127.0.0.1:28080 PROBE_ADDR=127.0.0.1:28081")
  fi
done

if [[ ${#problems[@]} -gt 0 ]]; then
  echo "cannot start: the machine lacks what this needs:" >&2
  printf '  - %s\n' "${problems[@]}" >&2
  exit 1
fi

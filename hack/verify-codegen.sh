#!/usr/bin/env bash
# Fails when pkg/generated, the zz_generated files or the CRD differ from what
# hack/update-codegen.sh makes of the current API types. It regenerates into a
# copy of the working tree (tracked and untracked files alike), so the
# developer's tree is never touched and new, not yet generated types count.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [[ -e "$f" ]] && printf '%s\0' "$f"
done | tar -cf - --null -T - | tar -xf - -C "$tmp"
# Reuse the generator binaries already built, if any.
[[ -d bin/codegen ]] && mkdir -p "$tmp/bin" && cp -r bin/codegen "$tmp/bin/"

(cd "$tmp" && bash hack/update-codegen.sh >/dev/null)

status=0
for d in pkg/apis pkg/generated manifests/crd charts/vidra/crds; do
  if ! diff -ruN "$d" "$tmp/$d" >"$tmp/diff.txt"; then
    echo "$d is out of date; run 'make generate'. Difference:"
    head -50 "$tmp/diff.txt"
    status=1
  fi
done
[[ $status -eq 0 ]] && echo "generated code and CRD are up to date"
exit $status

#!/usr/bin/env bash
# Runs staticcheck (its checks: staticcheck.conf) on the operator's module
# and on every nested module (hack/modules.sh). staticcheck is built once
# from the Go module proxy by hack/tools/build.sh and cached.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash hack/tools/build.sh staticcheck >/dev/null
staticcheck=${VIDRA_TOOLS_DIR:-$root/bin/tools}/staticcheck
status=0
for dir in . $(bash hack/modules.sh); do
  (cd "$dir" && "$staticcheck" ./...) || status=1
done
if [[ $status -ne 0 ]]; then
  echo "staticcheck found the problems above (its checks: staticcheck.conf)" >&2
fi
exit $status

#!/usr/bin/env bash
# Lists the directories of the Go modules nested under pkg/ and examples/:
# the watch registry's library modules and the example operator that
# imports them. (hack/tools and hack/controlplane hold build-only modules.) The root module's ./... does not reach into them, so
# make test, unit, vet and verify run each of them on its own.
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files --cached --others --exclude-standard 'pkg/*go.mod' 'examples/*go.mod' | xargs -r -n1 dirname | sort

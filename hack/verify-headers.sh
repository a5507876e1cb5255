#!/usr/bin/env bash
# Every hand-written Go file carries the licence header, so a file copied
# out of the repository still says under which terms (LICENSE: Apache-2.0).
# Generated code gets the longer form from hack/boilerplate.go.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=$(git ls-files --cached --others --exclude-standard '*.go' | grep -v '^pkg/generated/' | grep -v 'zz_generated' |
	while read -r f; do
		[[ -f $f ]] || continue
		head -3 "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0' || echo "$f"
	done)
if [[ -n $missing ]]; then
	echo "licence header missing (add '// Copyright The Vidra Authors.' and '// SPDX-License-Identifier: Apache-2.0' as the first lines):" >&2
	echo "$missing" >&2
	exit 1
fi

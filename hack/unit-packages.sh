#!/usr/bin/env bash
# Lists the packages make unit runs (with -short): those whose tests need no
# control plane, and those whose pure tests run without one under -short.
# A package is listed when its tests do not import internal/testenv (which
# starts a control plane), or when a test file of it calls
# testenv.RunMainShort: that call, in TestMain, is the marker of a package
# that starts no control plane under -short and whose tests that need one
# skip there. A package moves in or out of the list as its tests change.
# The nested modules (hack/modules.sh: the watch registry, its collector,
# the example) are not listed: make unit runs each with -short on its own.
set -euo pipefail
cd "$(dirname "$0")/.."
marker='testenv\.RunMainShort('
tab=$'\t'
go list -f "{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}$tab{{.Dir}}$tab{{join .TestImports \" \"}} {{join .XTestImports \" \"}}$tab{{join .TestGoFiles \"$tab\"}}$tab{{join .XTestGoFiles \"$tab\"}}{{end}}" ./... |
	while IFS=$tab read -r pkg dir imports files; do
		[[ -n $pkg ]] || continue
		# testenv's own tests start a control plane too.
		if ! grep -qE '/internal/testenv\b' <<<"$pkg $imports"; then
			echo "$pkg"
			continue
		fi
		IFS=$tab read -ra tests <<<"$files"
		for f in "${tests[@]}"; do
			if grep -q "$marker" "$dir/$f"; then
				echo "$pkg"
				break
			fi
		done
	done

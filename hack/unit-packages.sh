#!/usr/bin/env bash
# Lists the packages whose tests need no control plane: those with tests
# that do not import internal/testenv (which starts one). make unit runs
# them; a package moves in or out of the list as its tests change.
set -euo pipefail
cd "$(dirname "$0")/.."
go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}{{end}}' ./... |
	grep -v '/internal/testenv\b' | awk 'NF {print $1}'

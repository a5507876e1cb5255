#!/usr/bin/env bash
# The layout rule of the README: pkg/controller uses internal/apply and
# internal/destination, and neither of them imports it back (nor does the
# destination resolver import the apply engine).
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)
fail=0
deps() { go list -deps "$mod/$1"; }
for pkg in internal/apply internal/destination; do
	if deps "$pkg" | grep -qx "$mod/pkg/controller"; then
		echo "layout: $pkg imports pkg/controller" >&2
		fail=1
	fi
	if ! deps pkg/controller | grep -qx "$mod/$pkg"; then
		echo "layout: pkg/controller does not use $pkg" >&2
		fail=1
	fi
done
if deps internal/destination | grep -qx "$mod/internal/apply"; then
	echo "layout: internal/destination imports internal/apply" >&2
	fail=1
fi
exit $fail

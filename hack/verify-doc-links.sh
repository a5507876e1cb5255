#!/usr/bin/env bash
# Every relative link of the README and docs/ names a file that exists and,
# when it has a #fragment, a heading of that file: a doc split or a section
# renamed otherwise leaves links that lead nowhere, which no reader reports.
#
#   hack/verify-doc-links.sh                 # README.md and docs/
#   hack/verify-doc-links.sh bench/README.md # other Markdown files
#
# Anchors follow GitHub's rule for ASCII headings: lower case, punctuation
# other than '-' and '_' dropped, spaces as '-', '-1', '-2' for repeats.
# Links to http(s) and mailto are not followed; links inside code are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# == 0)); then
	set -- README.md $(find docs -name '*.md' | sort)
fi

# anchors FILE: the fragment of every heading of FILE, one a line.
anchors() {
	awk '
		/^```/ { fence = !fence; next }
		fence || !/^#+ / { next }
		{
			h = $0; sub(/^#+ +/, "", h); sub(/ +#* *$/, "", h)
			h = tolower(h); gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h)
			a = h; if (h in seen) a = h "-" seen[h]
			seen[h]++; print a
		}' "$1"
}

fail=0
for f in "$@"; do
	dir=$(dirname "$f")
	# links: every ](target) outside fenced blocks and inline code.
	while IFS=: read -r line target; do
		case $target in http://* | https://* | mailto:*) continue ;; esac
		path=${target%%#*}
		frag=
		[[ $target == *#* ]] && frag=${target#*#}
		dest=$f
		if [[ -n $path ]]; then
			dest=$dir/$path
			if [[ ! -e $dest ]]; then
				echo "$f:$line: $target: no file $dest" >&2
				fail=1
				continue
			fi
		fi
		if [[ -n $frag && -f $dest && $dest == *.md ]] && ! anchors "$dest" | grep -qxF -- "$frag"; then
			echo "$f:$line: $target: no heading #$frag in $dest" >&2
			fail=1
		fi
	done < <(awk '
		/^```/ { fence = !fence; next }
		fence { next }
		{
			s = $0; gsub(/`[^`]*`/, "", s)
			while (match(s, /\]\([^) ]+\)/)) {
				print FNR ":" substr(s, RSTART + 2, RLENGTH - 3)
				s = substr(s, RSTART + RLENGTH)
			}
		}' "$f")
done
exit $fail

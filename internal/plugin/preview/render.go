// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package preview

import (
	"fmt"
	"io"
	"strings"

	"github.com/vidra-operator/vidra/internal/plugin/render"
)

// ANSI colours of a diff on a terminal, as git colours its diffs.
const (
	red   = "\x1b[31m"
	green = "\x1b[32m"
	cyan  = "\x1b[36m"
	bold  = "\x1b[1m"
	reset = "\x1b[0m"
)

// Render writes r for a person: for each object that would change, or
// could not be previewed, a "# Kind ns/name: action" line, the reason when
// there is one, and the unified diff; then a summary line. Unchanged
// objects are only counted, as kubectl diff shows nothing for them. The
// output is a valid patch (lines starting with "#" are comments to patch
// tools). color adds ANSI colours, for a terminal.
//
// Kinds, names and messages come from objects tenants write and from API
// servers: they are printed through render's OneLine and Safe, so that no
// control character reaches the terminal and a header stays on its line.
// The diff's lines are YAML, which escapes the control characters of
// values (or refuses them); they go through SafeText for the rest, such as
// a bidirectional override, and for the labels of its ---/+++ lines.
func Render(w io.Writer, r *Result, color bool) error {
	paint := func(c, s string) string {
		if !color {
			return s
		}
		return c + s + reset
	}
	var b strings.Builder
	for _, o := range r.Objects {
		if o.Action == ActionUnchanged && o.Diff == "" {
			continue
		}
		head := fmt.Sprintf("# %s: %s", render.Safe(o.Ref()), o.Action)
		if o.Message != "" {
			head += " (" + render.OneLine(o.Message) + ")"
		}
		b.WriteString(paint(bold, head))
		b.WriteByte('\n')
		for _, line := range splitLines(o.Diff) {
			text := render.SafeText(strings.TrimSuffix(line, "\n"))
			switch {
			case strings.HasPrefix(text, "---"), strings.HasPrefix(text, "+++"):
				text = paint(bold, text)
			case strings.HasPrefix(text, "@@"):
				text = paint(cyan, text)
			case strings.HasPrefix(text, "+"):
				text = paint(green, text)
			case strings.HasPrefix(text, "-"):
				text = paint(red, text)
			}
			b.WriteString(text)
			b.WriteByte('\n')
		}
	}
	b.WriteString(paint(bold, "# "+render.Safe(r.Resource)+": "+Summary(r)))
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// Summary counts the objects by action, in the order a person reads a
// plan: "1 to create, 2 to change, 1 to prune, 3 unchanged".
func Summary(r *Result) string {
	var parts []string
	for _, s := range []struct {
		a    Action
		verb string
	}{
		{ActionCreate, "to create"},
		{ActionChange, "to change"},
		{ActionPrune, "to prune"},
		{ActionRelease, "to release"},
		{ActionHandOver, "to hand over"},
		{ActionKeep, "kept (prune refused)"},
		{ActionHeld, "held back (same kind and name fails)"},
		{ActionConflict, "in conflict"},
		{ActionError, "refused by the API server"},
		{ActionIgnore, "ignored"},
		{ActionUnchanged, "unchanged"},
	} {
		if n := r.Count(s.a); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s.verb))
		}
	}
	if len(parts) == 0 {
		return "no objects"
	}
	return strings.Join(parts, ", ")
}

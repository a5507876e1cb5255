// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package manifest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// maxParseAlloc is the most one Parse may allocate, whatever the manifest.
// MaxNodes caps the YAML node trees at about 52 MiB (120,000 nodes at about
// 450 bytes allocated each: the tree, the parser's tokens and events, the
// converted values); the rest covers the costs that do not grow with the
// nodes: a few copies of a text of up to 3 MiB (raw JSON values, line
// indexes, the scalars), a decoder per document, and the alias expansion
// of up to 256 Ki nodes and bytes.
const maxParseAlloc = 72 << 20

// parseAllocating parses manifest and returns how many bytes the parse
// allocated. It is meaningful only while nothing else in the process
// allocates much, so tests using it do not run in parallel.
func parseAllocating(manifest string) ([]Object, ErrorList, uint64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	objs, errs := Parse(manifest)
	runtime.ReadMemStats(&after)
	return objs, errs, after.TotalAlloc - before.TotalAlloc
}

// configMapHeader starts a valid document, so that what follows it is
// converted rather than refused for a missing apiVersion.
const configMapHeader = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hostile\n"

// aliasBomb returns the attack of issue 13: 20,000 padding nodes (so that a
// ratio of aliases to nodes lets the expansion through), a 4 KB string
// fanned out tenfold over levels, then "..." and a broken document, whose
// syntax error used to send the whole text to a second YAML library that
// expanded the first document. Five levels made 1.5 GB.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString(configMapHeader + "pad: [" + strings.Repeat("0,", 20000) + "0]\n")
	b.WriteString("l0: &l0 \"" + strings.Repeat("x", 4096) + "\"\n")
	for l := 1; l <= levels; l++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", l, l, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d,", l-1), 10), ","))
	}
	b.WriteString("...\nbroken: [\n")
	return b.String()
}

// mergeBomb fans out through merge keys rather than lists of aliases, which
// the older parser follows even when decoding into nothing but a mapping.
func mergeBomb(levels int) string {
	var b strings.Builder
	b.WriteString(configMapHeader + "m0: &m0 {k: \"" + strings.Repeat("x", 4096) + "\"}\n")
	for l := 1; l <= levels; l++ {
		fmt.Fprintf(&b, "m%d: &m%d {<<: [%s], n%d: 1}\n", l, l, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*m%d,", l-1), 10), ","), l)
	}
	b.WriteString("...\nbroken: [\n")
	return b.String()
}

// configMaps returns n minimal valid ConfigMap documents.
func configMaps(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n", i)
	}
	return b.String()
}

// hostileManifest is an attack on the parser and what it must end in.
type hostileManifest struct {
	name, manifest string
	// reason and fragment are what the first error must hold.
	reason, fragment string
}

// hostileManifests are the manifests written to hurt the parser: each
// expands, nests, repeats or packs nodes past a bound. They are also seeds
// of FuzzParse.
func hostileManifests() []hostileManifest {
	return append(denseManifests(1536<<10), []hostileManifest{
		{"alias bomb then a broken document", aliasBomb(5), ReasonInvalidManifest, "aliases expand to too much data"},
		{"deeper alias bomb then a broken document", aliasBomb(7), ReasonInvalidManifest, "aliases expand to too much data"},
		{"alias bomb in a valid document", strings.TrimSuffix(aliasBomb(6), "...\nbroken: [\n"), ReasonInvalidManifest, "aliases expand to too much data"},
		{"merge key bomb then a broken document", mergeBomb(6), ReasonInvalidManifest, "aliases expand to too much data"},
		{"alias bomb in JSON-looking flow YAML", "{apiVersion: v1, kind: ConfigMap, metadata: {name: a}, a: &a \"" + strings.Repeat("x", 4096) + "\", b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a], c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b], d: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]}", ReasonInvalidManifest, "invalid JSON"},
		{"anchor used across documents", configMapHeader + "a: &a \"" + strings.Repeat("x", 4096) + "\"\n---\n" + configMapHeader + "b: [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n", ReasonInvalidManifest, "unknown anchor"},
		{"deep flow nesting", configMapHeader + "a: " + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "\n", ReasonInvalidManifest, "nest deeper than 1000 levels"},
		{"deep block nesting", configMapHeader + deepBlock(1200), ReasonInvalidManifest, "nest deeper than 1000 levels"},
		{"deep nesting with an error at every leaf", configMapHeader + "a: " + strings.Repeat("[", 900) + strings.Repeat(".inf,", 20000) + "1" + strings.Repeat("]", 900) + "\n", ReasonInvalidManifest, "JSON has no infinity"},
		{"many documents", strings.Repeat("a: 1\n---\n", 50000), ReasonInvalidManifest, "stopped looking"},
		{"many empty documents", strings.Repeat("~\n---\n", 50000), ReasonManifestTooLarge, "more than 2000 documents"},
		{"many separators", strings.Repeat("---\n", 200000), ReasonInvalidManifest, "holds no objects"},
		{"many tiny objects", configMaps(MaxObjects + 1), ReasonManifestTooLarge, "more than 1000 objects"},
		{"many tiny objects in a List", `{"apiVersion":"v1","kind":"List","items":[` + strings.TrimSuffix(strings.Repeat(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},`, 5000), ",") + "]}", ReasonManifestTooLarge, "more than 1000 objects"},
		{"many empty JSON arrays", strings.Repeat("[]", 100000), ReasonManifestTooLarge, "more than 2000 documents"},
		{"long key", configMapHeader + "? " + strings.Repeat("k", 1<<20) + "\n: [" + strings.Repeat(".nan,", 5000) + "1]\n", ReasonInvalidManifest, "JSON has no infinity or NaN"},
		{"huge scalar", configMapHeader + "data:\n  big: " + strings.Repeat("y", 2<<20) + "\n  n: .nan\n", ReasonInvalidManifest, "JSON has no infinity or NaN"},
		{"deeply nested JSON arrays", strings.Repeat("[", 100000) + strings.Repeat("]", 100000), ReasonInvalidManifest, "invalid JSON"},
		{"deeply nested JSON objects", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"a":` + strings.Repeat(`{"a":`, 9000) + "1" + strings.Repeat("}", 9000) + "}", ReasonInvalidManifest, "nest deeper than 1000 levels"},
		{"repeated JSON keys deep down", strings.Repeat(`{"a":`, 900) + "{" + strings.Repeat(`"x":1,`, 30000) + `"x":1}` + strings.Repeat("}", 900), ReasonInvalidManifest, "given twice"},
		{"over the size limit", strings.Repeat("#", MaxManifestBytes+1), ReasonManifestTooLarge, "over the limit"},
	}...)
}

// deepBlock returns a block mapping nested n levels deep.
func deepBlock(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(strings.Repeat(" ", i) + "k:\n")
	}
	b.WriteString(strings.Repeat(" ", n) + "v\n")
	return b.String()
}

// TestParseHostileManifestsStayWithinMemoryBudget parses each hostile
// manifest and checks that it is refused with a clear error while the parse
// allocates no more than maxParseAlloc.
func TestParseHostileManifestsStayWithinMemoryBudget(t *testing.T) {
	for _, h := range hostileManifests() {
		t.Run(h.name, func(t *testing.T) {
			_, errs, alloc := parseAllocating(h.manifest)
			if alloc > maxParseAlloc {
				t.Errorf("Parse() of %d bytes allocated %d MiB, over the budget of %d MiB", len(h.manifest), alloc>>20, maxParseAlloc>>20)
			}
			if len(errs) == 0 {
				t.Fatalf("Parse() accepted the manifest")
			}
			if e := errs[0]; e.Reason != h.reason || !strings.Contains(e.Error(), h.fragment) {
				t.Errorf("first error = %s %q, want %s containing %q", e.Reason, e.Error(), h.reason, h.fragment)
			}
			for _, e := range errs {
				if len(e.Error()) > 4096 {
					t.Errorf("error of %d bytes: %.200s...", len(e.Error()), e.Error())
				}
			}
			if n := len(errs.Error()); n > 32768 {
				t.Errorf("the error list renders to %d bytes, more than a condition message holds", n)
			}
		})
	}
}

// TestParseObjectCapIsExact checks that MaxObjects objects are accepted and
// one more is refused, on the line of the first object over.
func TestParseObjectCapIsExact(t *testing.T) {
	objs, errs := Parse(configMaps(MaxObjects))
	if len(errs) > 0 || len(objs) != MaxObjects {
		t.Fatalf("Parse() of %d objects = %d objects, errors %v", MaxObjects, len(objs), errs)
	}
	_, errs = Parse(configMaps(MaxObjects + 1))
	want := &Error{Index: MaxObjects, Line: 5*MaxObjects + 2, Reason: ReasonManifestTooLarge}
	if len(errs) != 1 || errs[0].Index != want.Index || errs[0].Line != want.Line || errs[0].Reason != want.Reason {
		t.Fatalf("Parse() of %d objects: errors %v, want one at document %d, line %d", MaxObjects+1, errs, want.Index, want.Line)
	}
	if !strings.Contains(errs[0].Message, "1000 objects") || !strings.Contains(errs[0].Message, "split") {
		t.Errorf("message %q does not say the cap and what to do", errs[0].Message)
	}
}

// TestFieldPathIsBounded checks that field paths in errors keep their first
// and last segments and cut long keys.
func TestFieldPathIsBounded(t *testing.T) {
	var p *fieldPath
	p = p.child("spec")
	for range 100 {
		p = p.elem(0)
	}
	p = p.child(strings.Repeat("k", 1000))
	got := p.String()
	want := "spec[0][0][0][0][0]…" + strings.Repeat("[0]", pathTail-1) + `["` + strings.Repeat("k", maxKeyBytes) + `…"]`
	if got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	short := (*fieldPath)(nil).child("spec").child("containers").elem(0).child("image")
	if got := short.String(); got != "spec.containers[0].image" {
		t.Errorf("String() = %q, want spec.containers[0].image", got)
	}
}

// nestedLists returns a JSON List nested levels times around one ConfigMap
// whose one value is size bytes long.
func nestedLists(levels, size int) string {
	inner := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"` + strings.Repeat("x", size) + `"}}`
	return strings.Repeat(`{"kind":"List","items":[`, levels) + inner + strings.Repeat(`]}`, levels)
}

// A valid manifest costs its size, however deep its Lists nest: each level
// used to read the whole value again, 1.5 GB for 300 levels around 1 MiB.
func TestNestedListsAreReadOnce(t *testing.T) {
	objs, errs, alloc := parseAllocating(nestedLists(300, 1<<20))
	if len(errs) > 0 || len(objs) != 1 {
		t.Fatalf("Parse() = %d objects, %v; want the ConfigMap", len(objs), errs)
	}
	if alloc > maxParseAlloc {
		t.Errorf("Parse() allocated %d MiB, over the budget of %d MiB", alloc>>20, maxParseAlloc>>20)
	}
}

// Problems are reported up to the error cap, and the first line of a key
// given twice is still named.
func TestManyProblemsAreReportedUpToTheCap(t *testing.T) {
	for name, manifest := range manyProblems(3000) {
		t.Run(name, func(t *testing.T) {
			_, errs := Parse(manifest)
			if len(errs) < maxErrors || len(errs) > maxErrors+1 {
				t.Fatalf("%d errors, want %d (and the cap's own)", len(errs), maxErrors)
			}
			if name == "keys given twice" {
				// key i is on line 6+i, and given again 3000 lines later.
				if want := "this key is given twice (first on line 6)"; !strings.Contains(errs[0].Error(), want) || errs[0].Line != 3006 {
					t.Errorf("first error %q on line %d, want %q on line 3006", errs[0].Error(), errs[0].Line, want)
				}
			}
		})
	}
}

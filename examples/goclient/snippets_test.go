// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDocSnippetsAreCompiledCode: every Go snippet of the docs below stands
// in a Go file that go test or go vet compiles (this package for
// docs/go-client.md; the watch registry's readme_test.go files for its
// README), so that a recipe that no longer compiles, or a snippet edited
// without its code, fails here. A snippet is matched paragraph by
// paragraph (runs of lines between blank lines), each in one file, line
// for line with indentation and the spaces gofmt aligns comments with set
// aside.
func TestDocSnippetsAreCompiledCode(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		code string // directory searched, with its subdirectories
	}{
		{"../../docs/go-client.md", "."},
		{"../../pkg/watchregistry/README.md", "../../pkg/watchregistry"},
	} {
		t.Run(filepath.Base(filepath.Dir(tc.doc))+"/"+filepath.Base(tc.doc), func(t *testing.T) {
			var sources [][]string
			err := filepath.WalkDir(tc.code, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
					return err
				}
				data, err := os.ReadFile(path)
				sources = append(sources, normalized(string(data)))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			snippets := goSnippets(t, tc.doc)
			if len(snippets) == 0 {
				t.Fatalf("no Go snippet in %s", tc.doc)
			}
			for _, s := range snippets {
				for _, para := range s.paragraphs {
					if !slices.ContainsFunc(sources, func(src []string) bool { return contains(src, para) }) {
						t.Errorf("%s: the snippet at line %d has a paragraph no Go file under %s holds:\n%s",
							tc.doc, s.line, tc.code, strings.Join(para, "\n"))
					}
				}
			}
		})
	}
}

type snippet struct {
	line       int
	paragraphs [][]string
}

// goSnippets returns the fenced Go blocks of a Markdown file.
func goSnippets(t *testing.T, path string) []snippet {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []snippet
	var cur *snippet
	var para []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && line == "```go":
			cur = &snippet{line: n}
		case cur != nil && line == "```":
			if len(para) > 0 {
				cur.paragraphs = append(cur.paragraphs, para)
			}
			out, cur, para = append(out, *cur), nil, nil
		case cur != nil && strings.TrimSpace(line) == "":
			if len(para) > 0 {
				cur.paragraphs = append(cur.paragraphs, para)
			}
			para = nil
		case cur != nil:
			para = append(para, normalize(line))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func normalized(src string) []string {
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		lines[i] = normalize(l)
	}
	return lines
}

// normalize sets aside indentation and the width of runs of spaces.
func normalize(line string) string { return strings.Join(strings.Fields(line), " ") }

// contains reports whether para stands in src as consecutive lines.
func contains(src, para []string) bool {
	for i := 0; i+len(para) <= len(src); i++ {
		if slices.Equal(src[i:i+len(para)], para) {
			return true
		}
	}
	return false
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package pack

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vidra-operator/vidra/internal/manifest"
)

func TestPack(t *testing.T) {
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n"
	}
	tests := []struct {
		name  string
		files []File
		// want is the manifest, or errs the errors, one a line.
		want string
		errs string
	}{
		{
			name:  "one YAML file is kept as written, comments included",
			files: []File{{Path: "a.yaml", Data: []byte("# keep me\n" + cm("a") + "\n\n")}},
			want:  "# a.yaml\n# keep me\n" + cm("a"),
		},
		{
			name:  "files are joined as documents",
			files: []File{{Path: "a.yaml", Data: []byte(cm("a"))}, {Path: "b.yaml", Data: []byte("---\n" + cm("b") + "---\n" + cm("c"))}},
			want:  "# a.yaml\n" + cm("a") + "---\n# b.yaml\n---\n" + cm("b") + "---\n" + cm("c"),
		},
		{
			name:  "a JSON array becomes YAML documents",
			files: []File{{Path: "a.json", Data: []byte(`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}]`)}},
			want:  "# a.json\n" + cm("a") + "---\n" + cm("b"),
		},
		{
			name:  "errors name the file, document and line",
			files: []File{{Path: "a.yaml", Data: []byte(cm("a"))}, {Path: "b.yaml", Data: []byte(cm("b") + "---\nkind: ConfigMap\nmetadata:\n  name: c\n")}},
			errs:  "b.yaml: document 2 (line 6): apiVersion: required",
		},
		{
			name:  "an object in two files is a duplicate",
			files: []File{{Path: "a.yaml", Data: []byte(cm("a"))}, {Path: "b.yaml", Data: []byte(cm("b") + "---\n" + cm("a"))}},
			errs:  "b.yaml: document 2 (line 6): ConfigMap a is also document 1 (line 1) of a.yaml; an object may appear only once in a manifest",
		},
		{
			name: "an Event in its two API groups is one object",
			files: []File{{Path: "a.yaml", Data: []byte("apiVersion: v1\nkind: Event\nmetadata:\n  name: e\n")},
				{Path: "b.yaml", Data: []byte("apiVersion: events.k8s.io/v1\nkind: Event\nmetadata:\n  name: e\n")}},
			errs: "b.yaml: document 1 (line 1): Event e is also document 1 (line 1) of a.yaml; an object may appear only once in a manifest",
		},
		{
			name:  "an empty file is refused",
			files: []File{{Path: "a.yaml", Data: []byte("# nothing\n")}},
			errs:  "a.yaml: manifest holds no objects; an empty manifest is refused so that it can never prune every object",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Pack(tc.files)
			if tc.errs != "" {
				if err == nil {
					t.Fatalf("no error; manifest:\n%s", m.Text)
				}
				if diff := cmp.Diff(tc.errs, err.Error()); diff != "" {
					t.Errorf("errors (-want +got):\n%s", diff)
				}
				var fe *FileError
				var me *manifest.Error
				if !errors.As(err, &fe) || !errors.As(err, &me) {
					t.Errorf("%T does not unwrap to a *FileError and a *manifest.Error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, m.Text); diff != "" {
				t.Errorf("manifest (-want +got):\n%s", diff)
			}
			if _, errs := manifest.Parse(m.Text); len(errs) > 0 {
				t.Errorf("the packed manifest does not parse: %v", errs)
			}
		})
	}
}

func TestReadTakesTheManifestFilesOfADirectoryInLexicalOrder(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.yml", "a.yaml", "c.json", "README.md", "d.YAML"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := Read([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f.Path))
	}
	if diff := cmp.Diff([]string{"a.yaml", "b.yml", "c.json", "d.YAML"}, got); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}

	if _, err := Read([]string{t.TempDir()}, nil); err == nil || !strings.Contains(err.Error(), "holds no .yaml") {
		t.Errorf("an empty directory: %v", err)
	}
	files, err = Read([]string{"-"}, strings.NewReader("x"))
	if err != nil || len(files) != 1 || string(files[0].Data) != "x" {
		t.Errorf("stdin: %v, %v", files, err)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package pack

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/manifest"
)

// File is one input file: its name as the person gave it, for messages,
// and its content.
type File struct {
	Path string
	Data []byte
}

// Manifest is the packed manifest.
type Manifest struct {
	// Text is the multi-document YAML manifest for spec.manifest.
	Text string
	// Objects are the objects of the manifest, in order, as the operator
	// parses them.
	Objects []manifest.Object
	// Files are the files packed, in order.
	Files []string
}

// extensions are the files a directory contributes, as kubectl -f reads them.
var extensions = []string{".yaml", ".yml", ".json"}

// Read reads the files paths name. A directory stands for its files with
// the extensions .yaml, .yml and .json, in lexical order; subdirectories are
// not read. "-" reads stdin.
func Read(paths []string, stdin io.Reader) ([]File, error) {
	if len(paths) == 0 {
		return nil, errors.New("no file given: use -f FILE or -f DIRECTORY")
	}
	var files []File
	for _, p := range paths {
		if p == "-" {
			data, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("read stdin: %w", err)
			}
			files = append(files, File{Path: "<stdin>", Data: data})
			continue
		}
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			files = append(files, File{Path: p, Data: data})
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		before := len(files)
		// os.ReadDir sorts by name: lexical order.
		for _, e := range entries {
			if e.IsDir() || !slices.Contains(extensions, strings.ToLower(filepath.Ext(e.Name()))) {
				continue
			}
			path := filepath.Join(p, e.Name())
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			files = append(files, File{Path: path, Data: data})
		}
		if len(files) == before {
			return nil, fmt.Errorf("directory %s holds no .yaml, .yml or .json file", p)
		}
	}
	return files, nil
}

// FileError is a problem of one input file, located by the manifest
// parser within that file.
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *FileError) Unwrap() error { return e.Err }

// Errors are every problem found in the files, in file order.
type Errors []error

func (l Errors) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

func (l Errors) Unwrap() []error { return l }

// Pack validates each file with the operator's parser and joins them into
// one manifest. It reports every problem of every file at once, as an
// Errors of *FileError, so that one edit can fix them all.
func Pack(files []File) (*Manifest, error) {
	type origin struct {
		path string
		obj  manifest.Object
	}
	type key struct{ group, kind, namespace, name string }
	var (
		errs  Errors
		docs  []string
		seen  = map[key]origin{}
		names []string
	)
	for _, f := range files {
		names = append(names, f.Path)
		text := string(f.Data)
		objs, perrs := manifest.Parse(text)
		for _, e := range perrs {
			errs = append(errs, &FileError{Path: f.Path, Err: e})
		}
		for _, o := range objs {
			gvk := o.Object.GroupVersionKind()
			k := key{manifest.StoredGroup(gvk.Group, gvk.Kind), gvk.Kind, o.Object.GetNamespace(), o.Object.GetName()}
			if prev, dup := seen[k]; dup {
				errs = append(errs, &FileError{Path: f.Path, Err: &manifest.Error{
					Index: o.Index, Line: o.Line, Reason: manifest.ReasonDuplicateObject,
					Message: fmt.Sprintf("%s is also document %d (line %d) of %s; an object may appear only once in a manifest",
						describe(o.Object), manifest.DocumentNumber(prev.obj.Index), prev.obj.Line, prev.path),
				}})
				continue
			}
			seen[k] = origin{path: f.Path, obj: o}
		}
		if len(perrs) > 0 {
			continue
		}
		if isJSON(text) {
			// A YAML manifest cannot hold a JSON array or a second
			// top-level JSON value: write the objects as YAML documents.
			for i, o := range objs {
				y, err := yaml.Marshal(o.Object.Object)
				if err != nil {
					errs = append(errs, &FileError{Path: f.Path, Err: fmt.Errorf("document %d: %w", manifest.DocumentNumber(o.Index), err)})
					continue
				}
				doc := string(y)
				if i == 0 {
					doc = "# " + f.Path + "\n" + doc
				}
				docs = append(docs, doc)
			}
			continue
		}
		docs = append(docs, "# "+f.Path+"\n"+strings.TrimRight(strings.TrimPrefix(text, "\uFEFF"), " \t\r\n")+"\n")
	}
	if len(errs) > 0 {
		return nil, errs
	}
	text := strings.Join(docs, "---\n")
	// Each file parsed alone; the whole must parse too, within the limits
	// of one manifest (objects, size), as the operator will read it.
	objs, perrs := manifest.Parse(text)
	if len(perrs) > 0 {
		for _, e := range perrs {
			errs = append(errs, &FileError{Path: "the packed manifest", Err: e})
		}
		return nil, errs
	}
	return &Manifest{Text: text, Objects: objs, Files: names}, nil
}

// isJSON tells a JSON file as the parser does: by its first character
// other than white space.
func isJSON(s string) bool {
	s = strings.TrimLeft(strings.TrimPrefix(s, "\uFEFF"), " \t\r\n")
	return strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[")
}

func describe(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.GetKind() + " " + ns + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package preview

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vidra-operator/vidra/internal/plugin/render"
)

// noise are the metadata fields that every write changes or that only the
// API server sets; a preview that showed them would show a change for
// every object.
var noise = []string{"managedFields", "resourceVersion", "generation", "creationTimestamp", "uid", "selfLink", "deletionGracePeriodSeconds"}

// Clean returns a copy of u without the fields a preview leaves out: the
// status (the object's controller writes it, never an apply) and the
// metadata that changes on every write.
func Clean(u *unstructured.Unstructured) *unstructured.Unstructured {
	if u == nil {
		return nil
	}
	c := u.DeepCopy()
	delete(c.Object, "status")
	for _, f := range noise {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	return c
}

// YAML returns the cleaned object as YAML, keys sorted, "" for nil, with
// the runes a terminal acts on written as YAML escapes (render.JSONToYAML):
// the lines of a diff are valid YAML that reads back as the object.
func YAML(u *unstructured.Unstructured) (string, error) {
	if u == nil {
		return "", nil
	}
	j, err := json.Marshal(Clean(u).Object)
	if err != nil {
		return "", fmt.Errorf("encode %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	b, err := render.JSONToYAML(j)
	if err != nil {
		return "", fmt.Errorf("encode %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return string(b), nil
}

// UnifiedDiff returns the unified diff (three lines of context) from
// before to after, labelled with the names given; "" when they are equal.
func UnifiedDiff(before, after, fromName, toName string) (string, error) {
	if before == after {
		return "", nil
	}
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A:        splitLines(before),
		B:        splitLines(after),
		FromFile: fromName,
		ToFile:   toName,
		Context:  3,
	})
}

// splitLines splits s into lines that keep their "\n", as difflib wants
// them; a last line without one gets one, so that it diffs like the rest.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] += "\n"
	}
	return lines
}

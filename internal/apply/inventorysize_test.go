// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vidra-operator/vidra/internal/manifest"
)

func TestJSONStringBytesIsWhatEncodingJSONWrites(t *testing.T) {
	for _, s := range []string{"", "web", "a\"b\\c", "<>&", "line\nfeed\ttab\r", "\x00\x01\x1f\b\f", "é€😀", "\u2028\u2029", "bad\xffutf8\xc3", strings.Repeat("<", 253)} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := jsonStringBytes(s), len(b)-2; got != want {
			t.Errorf("jsonStringBytes(%q) = %d, want %d (%s)", s, got, want, b)
		}
	}
}

func TestInventoryNamesThatCannotFitAreRefused(t *testing.T) {
	objs := func(n int, name func(int) string) []manifest.Object {
		var out []manifest.Object
		for i := range n {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("v1")
			u.SetKind("ConfigMap")
			u.SetNamespace("team-a")
			u.SetName(name(i))
			out = append(out, manifest.Object{Object: u})
		}
		return out
	}
	longest := func(i int) string { return fmt.Sprintf("%d-", i) + strings.Repeat("a", 253-len(fmt.Sprint(i))-1) }
	if err := checkInventoryNames(objs(manifest.MaxObjects, longest)); err != nil {
		t.Errorf("1,000 objects of the longest valid names refused: %v", err)
	}
	escaped := func(i int) string { return fmt.Sprintf("%d-", i) + strings.Repeat("<", 253-len(fmt.Sprint(i))-1) }
	err := checkInventoryNames(objs(manifest.MaxObjects, escaped))
	if err == nil || !strings.Contains(err.Error(), "split the objects over several VidraResources") {
		t.Errorf("1,000 names of 253 escaped characters: %v, want refused with what to do", err)
	}
}

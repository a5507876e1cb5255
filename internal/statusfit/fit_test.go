// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package statusfit

import (
	"encoding/json"
	"strings"
	"testing"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// jsonSize and jsonStringSize are what encoding/json writes, escapes
// included.
func TestJSONSizeCountsEscapes(t *testing.T) {
	values := []string{"", "abc", "<>&", "é…", "\u2028\u2029", "\xff\xfe", "a\xc3", "😀", strings.Repeat("<", 200)}
	for b := range 256 {
		values = append(values, string([]byte{byte(b)}), "x"+string([]byte{byte(b)})+"é")
	}
	for _, s := range values {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonStringSize(s); got != len(b) {
			t.Errorf("jsonStringSize(%q) = %d, want %d (%s)", s, got, len(b), b)
		}
		if got := jsonSize(s); got != len(b) {
			t.Errorf("jsonSize(%q) = %d, want %d (%s)", s, got, len(b), b)
		}
	}
	m := v1alpha1.ManagedResource{Name: "<", HealthMessage: "é"}
	if b, _ := json.Marshal(m); jsonSize(m) != len(b) {
		t.Errorf("jsonSize(%+v) = %d, want %d", m, jsonSize(m), len(b))
	}
}

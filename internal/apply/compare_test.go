// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"encoding/json"
	"testing"
)

func TestIsSubset(t *testing.T) {
	tests := []struct {
		name          string
		desired, live string
		want          bool
	}{
		{"equal", `{"a":1}`, `{"a":1}`, true},
		{"live has more", `{"a":1}`, `{"a":1,"b":2}`, true},
		{"value differs", `{"a":1}`, `{"a":2}`, false},
		{"missing in live", `{"a":1}`, `{}`, false},
		{"nested defaults ignored", `{"spec":{"ports":[{"port":80}]}}`, `{"spec":{"ports":[{"port":80,"protocol":"TCP"}]}}`, true},
		{"list length differs", `{"l":[1,2]}`, `{"l":[1]}`, false},
		{"list order matters", `{"l":[1,2]}`, `{"l":[2,1]}`, false},
		{"null wants absence", `{"a":null}`, `{}`, true},
		{"null but present", `{"a":null}`, `{"a":1}`, false},
		{"int and float are numbers", `{"a":1}`, `{"a":1.0}`, true},
		{"type differs", `{"a":"1"}`, `{"a":1}`, false},
		{"map vs scalar", `{"a":{"b":1}}`, `{"a":"x"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d, l any
			if err := json.Unmarshal([]byte(tt.desired), &d); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.live), &l); err != nil {
				t.Fatal(err)
			}
			if got := isSubset(d, l); got != tt.want {
				t.Errorf("isSubset(%s, %s) = %v, want %v", tt.desired, tt.live, got, tt.want)
			}
		})
	}
}

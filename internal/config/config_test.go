package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	prev := &Config{RequeueAfter: time.Minute, EventBased: false, Jitter: 0.5, OverrideManagers: []string{"kubectl"}}
	tests := []struct {
		name         string
		data         map[string]string
		want         *Config
		wantProblems []string
	}{
		{name: "missing keys mean defaults", data: nil, want: Default()},
		{
			name: "every key",
			data: map[string]string{"requeueResourcesAfter": "30s", "eventBasedReconcile": "false", "requeueJitter": "25%", "overrideManagers": " a, b ,,c"},
			want: &Config{RequeueAfter: 30 * time.Second, EventBased: false, Jitter: 0.25, OverrideManagers: []string{"a", "b", "c"}},
		},
		{
			name: "zero turns the interval off and a fraction is a jitter",
			data: map[string]string{"requeueResourcesAfter": "0", "requeueJitter": "0.2"},
			want: &Config{RequeueAfter: 0, EventBased: true, Jitter: 0.2, OverrideManagers: DefaultOverrideManagers},
		},
		{
			name:         "bad values keep the previous settings",
			data:         map[string]string{"requeueResourcesAfter": "soon", "eventBasedReconcile": "yes please", "requeueJitter": "150%"},
			want:         &Config{RequeueAfter: time.Minute, EventBased: false, Jitter: 0.5, OverrideManagers: DefaultOverrideManagers},
			wantProblems: []string{"eventBasedReconcile", "requeueJitter", "requeueResourcesAfter"},
		},
		{
			name:         "negative interval is refused",
			data:         map[string]string{"requeueResourcesAfter": "-5m"},
			want:         &Config{RequeueAfter: time.Minute, EventBased: true, Jitter: 0.1, OverrideManagers: DefaultOverrideManagers},
			wantProblems: []string{"requeueResourcesAfter"},
		},
		{
			name:         "an interval under a second is refused: it would be a reconcile loop",
			data:         map[string]string{"requeueResourcesAfter": "1ns"},
			want:         &Config{RequeueAfter: time.Minute, EventBased: true, Jitter: 0.1, OverrideManagers: DefaultOverrideManagers},
			wantProblems: []string{"requeueResourcesAfter"},
		},
		{
			name:         "earlier operator's keys are accepted with a warning",
			data:         map[string]string{"requeueSyncAfter": "1m", "queryName": "x", "typo": "1"},
			want:         Default(),
			wantProblems: []string{"queryName", "requeueSyncAfter", "typo"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := Parse(tt.data, prev)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			var keys []string
			for _, p := range problems {
				keys = append(keys, p.Key)
			}
			if diff := cmp.Diff(tt.wantProblems, keys); diff != "" {
				t.Errorf("problems (-want +got):\n%s\n%v", diff, problems)
			}
		})
	}
}

func TestJittered(t *testing.T) {
	if got := Jittered(10*time.Second, 0.1, func() float64 { return 1 }); got != 11*time.Second {
		t.Errorf("full jitter = %v, want 11s", got)
	}
	if got := Jittered(0, 0.1, func() float64 { return 1 }); got != 0 {
		t.Errorf("jitter of an interval that is off = %v, want 0", got)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// auditLog writes a log of a client polling a ConfigMap every 2 s, 30
// times, under a hostile user agent, and returns its path.
func auditLog(t *testing.T) string {
	t.Helper()
	start := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	var b strings.Builder
	for i := range 30 {
		for _, stage := range []string{"RequestReceived", "ResponseComplete"} {
			line, _ := json.Marshal(map[string]any{
				"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "stage": stage,
				"auditID": fmt.Sprintf("a-%d", i), "verb": "get", "requestURI": "/api/v1/namespaces/demo/configmaps/settings",
				"user":                     map[string]any{"username": "poller" + hostile},
				"userAgent":                "poller" + hostile + "/v1.0.0 (linux/amd64) kubernetes/abc",
				"objectRef":                map[string]any{"resource": "configmaps", "namespace": "demo", "name": "settings" + hostile},
				"responseStatus":           map[string]any{"code": 200},
				"requestReceivedTimestamp": start.Add(time.Duration(i) * 2 * time.Second).Format(time.RFC3339Nano),
			})
			b.Write(line)
			b.WriteByte('\n')
		}
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestWakeupsNamesThePollAndKeepsLogBytesOffTheTerminal(t *testing.T) {
	log := auditLog(t)
	svg := filepath.Join(t.TempDir(), "w.svg")
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"table", []string{"--audit-log", log, "--plot", svg}, 0, []string{"requeue-poll", "2s", "get of one object at a fixed period", "Coverage: 1 files, 60 lines, 30 requests"}},
		{"json", []string{"--audit-log", log, "-o", "json"}, 0, []string{`"cause": "requeue-poll"`, `"periodSeconds": 2`}},
		{"budget exceeded", []string{"--audit-log", log, "--budget", "poller" + hostile + "=100/h"}, 1, []string{"EXCEEDED"}},
		{"budget held", []string{"--audit-log", log, "--budget", "poller" + hostile + "=2000/h"}, 0, []string{"within"}},
		{"budget of a client not in the log", []string{"--audit-log", log, "--budget", "nobody=1/h"}, 1, []string{"NOT CHECKED"}},
		{"bad budget", []string{"--audit-log", log, "--budget", "poller"}, 2, nil},
		{"missing file", []string{"--audit-log", log + ".missing"}, 2, nil},
		{"window", []string{"--audit-log", log, "--since", "2026-11-01T10:00:10Z", "--until", "2026-11-01T10:00:20Z"}, 0, []string{"25 outside the window"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			streams, _, out, errOut := genericiooptions.NewTestIOStreams()
			code := Execute(context.Background(), streams, append([]string{"wakeups"}, tc.args...))
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
			checkTerminal(t, "wakeups", out.String()+errOut.String())
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	b, err := os.ReadFile(svg)
	if err != nil || !strings.Contains(string(b), "<svg") || strings.Contains(string(b), "\x1b") {
		t.Fatalf("plot: %v\n%.300s", err, b)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// TestClientGoLogsEndUpInZap has client-go's event broadcaster log an Event
// through klog and checks that the line arrives as zap JSON.
func TestClientGoLogsEndUpInZap(t *testing.T) {
	out := filepath.Join(t.TempDir(), "log.json")
	if _, err := newLogger("info", "json", out); err != nil {
		t.Fatal(err)
	}
	defer klog.ClearLogger()

	broadcaster := record.NewBroadcaster(record.WithContext(t.Context()))
	defer broadcaster.Shutdown()
	broadcaster.StartStructuredLogging(0)
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "vidra-test"})
	recorder.Event(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}}, corev1.EventTypeNormal, "Probe", "routed through klog")

	var found map[string]any
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		data, _ := os.ReadFile(out)
		for _, line := range bytes.Split(data, []byte("\n")) {
			var entry map[string]any
			if json.Unmarshal(line, &entry) != nil {
				continue
			}
			if entry["reason"] == "Probe" {
				found = entry
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		data, _ := os.ReadFile(out)
		t.Fatalf("client-go's event log line is not in zap's JSON output: %v\n%s", err, data)
	}
	for _, key := range []string{"level", "ts", "msg", "caller"} {
		if _, ok := found[key]; !ok {
			t.Errorf("entry lacks zap's %q: %v", key, found)
		}
	}
	if caller, _ := found["caller"].(string); !strings.Contains(caller, "record/") {
		t.Errorf("caller %q is not client-go's record package", caller)
	}
}

func TestBadLogFlagsAreRefused(t *testing.T) {
	if _, err := newLogger("loud", "json", "stderr"); err == nil {
		t.Error("--log-level loud accepted")
	}
	if _, err := newLogger("info", "xml", "stderr"); err == nil {
		t.Error("--log-format xml accepted")
	}
}

func TestSplitListLeavesTheDefaultToNil(t *testing.T) {
	if got := splitList(""); got != nil {
		t.Errorf("empty flag: %q, want nil (the operator's namespace)", got)
	}
	if got := splitList(" team-a, ,team-b,"); strings.Join(got, "|") != "team-a|team-b" {
		t.Errorf("got %q", got)
	}
	if got := splitList("*"); len(got) != 1 || got[0] != "*" {
		t.Errorf("got %q", got)
	}
}

// TestWarningsAreOneWarnLineAndErrorsHaveNoStackTrace: a problem the
// operator works around is logged at warn level, and an error is one line,
// in both formats.
func TestWarningsAreOneWarnLineAndErrorsHaveNoStackTrace(t *testing.T) {
	for _, format := range []string{"json", "console"} {
		t.Run(format, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "log")
			logger, err := newLogger("info", format, out)
			if err != nil {
				t.Fatal(err)
			}
			defer klog.ClearLogger()
			logger.Info("Invalid configuration value; keeping the previous setting", "severity", "warning", "key", "requeueResourcesAfter")
			logger.Error(nil, "Reconcile failed", "vidraresource", "ns/vr")
			logger.Info("Configuration applied", "eventBasedReconcile", true)
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) != 3 {
				t.Fatalf("%d lines, want 3 (no stack trace):\n%s", len(lines), data)
			}
			warn, errLine, info := lines[0], lines[1], lines[2]
			if !strings.Contains(strings.ToLower(warn), "warn") || strings.Contains(warn, "severity") {
				t.Errorf("warning line %q: want the warn level and no severity field", warn)
			}
			if !strings.Contains(strings.ToLower(errLine), "error") {
				t.Errorf("error line %q lacks the error level", errLine)
			}
			if !strings.Contains(strings.ToLower(info), "info") {
				t.Errorf("info line %q lacks the info level", info)
			}
		})
	}
}

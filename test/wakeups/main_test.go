// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package wakeups_test proves kubectl vidra wakeups on real traffic: clients
// written for the test (a poller, a heartbeat, a hot loop, two writers
// fighting) and an idle Vidra run against a control plane whose API server
// audits every request with the policy docs/wakeups.md ships
// (manifests/samples/audit/audit-policy.yaml); the command must name each with
// its cause and period, and hold Vidra's idle budget.
package wakeups_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/vidra-operator/vidra/internal/testenv"
)

var (
	env *testenv.Env
	// auditLog is the API server's audit log.
	auditLog string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run starts a control plane that audits every request into auditLog,
// runs the tests, and stops it and removes the log (testenv.RunMain would
// exit before the log's directory is removed).
func run(m *testing.M) int {
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "vidra-wakeups-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	auditLog = filepath.Join(dir, "audit.log")
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	env, err = testenv.Start(ctx, testenv.Options{ExtraAPIServerArgs: []string{
		"--audit-policy-file=" + filepath.Join(root, "manifests/samples/audit/audit-policy.yaml"),
		"--audit-log-path=" + auditLog,
		"--audit-log-format=json",
		"--audit-log-maxsize=0",
	}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start control plane: %v\n", err)
		return 1
	}
	defer env.Stop()
	return m.Run()
}

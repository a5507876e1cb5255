// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"k8s.io/client-go/rest"
)

// RunMain starts one control plane for a test package, stores it in *env for
// the package's tests, runs them and tears the control plane down, also when
// the run is interrupted. Use it as the whole body of TestMain:
//
//	var env *controlplane.Env
//	func TestMain(m *testing.M) { controlplane.RunMain(m, &env, controlplane.Options{}) }
//
// Each setup runs once the control plane is up (to install CRDs or start an
// operator); the func it returns runs after the tests, before teardown.
func RunMain(m *testing.M, env **Env, opts Options, setups ...func(context.Context, *Env) (func(), error)) {
	os.Exit(runMain(m, env, opts, setups))
}

// RunMainShort is RunMain for a package whose tests are in part pure (no
// API server): under go test -short it starts no control plane, leaves *env
// nil and runs the tests, so that the pure ones run in milliseconds and the
// others skip through Need. Without -short it is RunMain.
func RunMainShort(m *testing.M, env **Env, opts Options, setups ...func(context.Context, *Env) (func(), error)) {
	// testing.Short reads the flags, which m.Run would parse only later.
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	RunMain(m, env, opts, setups...)
}

// Need returns the admin configuration of env, the control plane of
// RunMainShort, for a test that needs an API server. Under go test -short,
// where there is none, it skips the test; a nil env otherwise is a TestMain
// that started none, and fails it.
func Need(t testing.TB, env *Env) *rest.Config {
	t.Helper()
	if env != nil {
		return env.Config
	}
	if testing.Short() {
		t.Skip("needs a control plane, which go test -short does not start")
	}
	t.Fatal("no control plane: TestMain started none")
	return nil
}

func runMain(m *testing.M, env **Env, opts Options, setups []func(context.Context, *Env) (func(), error)) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, err := Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "start control plane: %v\n", err)
		return 1
	}
	*env = e
	defer e.Stop()

	// An interrupted run (Ctrl-C, go test -timeout's SIGQUIT is not caught)
	// still tears the control plane down.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; ok {
			e.Stop()
			os.Exit(1)
		}
	}()
	for _, setup := range setups {
		cleanup, err := setup(ctx, e)
		if err != nil {
			fmt.Fprintf(os.Stderr, "set up tests: %v\n", err)
			return 1
		}
		if cleanup != nil {
			defer cleanup()
		}
	}
	return m.Run()
}

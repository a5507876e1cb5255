package testenv

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// RunMain starts one control plane for a test package, stores it in *env for
// the package's tests, runs them and tears the control plane down, also when
// the run is interrupted. Use it as the whole body of TestMain:
//
//	var env *testenv.Env
//	func TestMain(m *testing.M) { testenv.RunMain(m, &env, testenv.Options{}) }
//
// Each setup runs once the control plane is up (to install CRDs or start an
// operator); the func it returns runs after the tests, before teardown.
func RunMain(m *testing.M, env **Env, opts Options, setups ...func(context.Context, *Env) (func(), error)) {
	os.Exit(runMain(m, env, opts, setups))
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

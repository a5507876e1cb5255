// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/vidra-operator/vidra/pkg/watchregistry/controlplane"
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
	controlplane.RunMain(m, env, withDefaults(opts), setups...)
}

// RunMainShort is RunMain for a package whose tests are in part pure (no
// API server): under go test -short it starts no control plane, leaves *env
// nil and runs the tests, so that the pure ones run in milliseconds and the
// others skip through Need. Without -short it is RunMain. make unit runs
// with -short, and hack/unit-packages.sh lists the packages whose TestMain
// calls it.
func RunMainShort(m *testing.M, env **Env, opts Options, setups ...func(context.Context, *Env) (func(), error)) {
	controlplane.RunMainShort(m, env, withDefaults(opts), setups...)
}

// Need returns the admin configuration of env, the control plane of
// RunMainShort, for a test that needs an API server. Under go test -short,
// where there is none, it skips the test; a nil env otherwise is a TestMain
// that started none, and fails it.
func Need(t testing.TB, env *Env) *rest.Config {
	t.Helper()
	return controlplane.Need(t, env)
}

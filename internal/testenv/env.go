// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/vidra-operator/vidra/pkg/watchregistry/controlplane"
)

// KubernetesVersion is the version of the control plane binaries the harness
// runs; hack/controlplane/build.sh builds them into bin/controlplane/<version>.
const KubernetesVersion = "v1.37.1"

// Name names the harness's control planes (Options.Name): their temporary
// directories are vidra-testenv-<pid>-*, and their CA and admin are
// vidra-testenv-ca and vidra-testenv-admin.
const Name = "vidra-testenv"

// Options tune a control plane; see controlplane.Options. The zero value is
// a sensible default: BinDir empty means $VIDRA_CONTROLPLANE_DIR, else
// bin/controlplane/<KubernetesVersion> of the repository that contains the
// working directory, and Name empty means Name.
type Options = controlplane.Options

// Env is one running control plane; see controlplane.Env.
type Env = controlplane.Env

// Start starts etcd, kube-apiserver and kube-controller-manager and returns
// once the API server is ready and the default namespace exists. On error
// everything already started is stopped again.
func Start(ctx context.Context, opts Options) (*Env, error) {
	return controlplane.Start(ctx, withDefaults(opts))
}

// withDefaults fills in the repository's binaries and the harness's name.
func withDefaults(opts Options) Options {
	if opts.Name == "" {
		opts.Name = Name
	}
	if opts.BinDir == "" && os.Getenv(controlplane.DirEnv) == "" {
		// Without a repository the control plane's own error names the
		// variable to set.
		if root, err := RepoRoot(); err == nil {
			opts.BinDir = filepath.Join(root, "bin", "controlplane", KubernetesVersion)
		}
	}
	return opts
}

// RepoRoot walks up from the working directory to the operator's go.mod, so
// tests can find the repository's files (CRDs, samples) from any package.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/vidra-operator/vidra\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (go.mod of github.com/vidra-operator/vidra) not found above the working directory")
		}
		dir = parent
	}
}

// Namespace creates a namespace named prefix plus a random suffix, for one
// test to isolate itself in, and deletes it when the test ends.
func Namespace(t testing.TB, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	return controlplane.Namespace(t, cs, prefix)
}

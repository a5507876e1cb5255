// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package chart_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/testenv"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

var (
	env   *testenv.Env
	kube  kubernetes.Interface
	vidra versioned.Interface
	// root is the repository's root; chartDir its charts/vidra.
	root, chartDir string
	// vidraBinary is cmd/vidra, built once by TestMain.
	vidraBinary string
	// kubeconfig is an admin kubeconfig file for helm.
	kubeconfig string
)

func TestMain(m *testing.M) {
	testenv.RunMain(m, &env, testenv.Options{}, setup)
}

func setup(ctx context.Context, e *testenv.Env) (func(), error) {
	var err error
	if root, err = testenv.RepoRoot(); err != nil {
		return nil, err
	}
	chartDir = filepath.Join(root, "charts/vidra")
	dir, err := os.MkdirTemp("", "vidra-chart-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	vidraBinary = filepath.Join(dir, "vidra")
	if err := testenv.BuildVidra(ctx, vidraBinary, true); err != nil {
		cleanup()
		return nil, err
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := e.WriteKubeconfig(kubeconfig); err != nil {
		cleanup()
		return nil, err
	}
	kube = kubernetes.NewForConfigOrDie(e.Config)
	vidra = versioned.NewForConfigOrDie(e.Config)
	return cleanup, nil
}

// tool is the path of a tool hack/tools/build.sh builds, and fails the
// test with how to build it when it is missing.
func tool(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("VIDRA_TOOLS_DIR")
	if dir == "" {
		dir = filepath.Join(root, "bin/tools")
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not built: run make tools (hack/tools/build.sh): %v", name, err)
	}
	return p
}

// helm runs helm with args against the test control plane, in a home of
// the test's own (no repository, cache or plugin of the machine's user),
// and returns its standard output.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helmErr(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func helmErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), tool(t, "helm"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HELM_CACHE_HOME="+home+"/cache",
		"HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return stdout.String(), nil
}

// kubeVersion is the control plane's Kubernetes version, which helm
// template assumes.
const kubeVersion = "v1.37.1"

// template renders the chart as release vidra of namespace vidra-system
// (the kustomize install's names), with the CRDs, and values files and
// --set flags in args.
func template(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out := helm(t, append([]string{"template", "vidra", chartDir, "--namespace", installNamespace,
		"--include-crds", "--kube-version", kubeVersion}, args...)...)
	return parseObjects(t, "helm template", out)
}

// kustomize renders the kustomization in dir (relative to the repository)
// as kubectl kustomize does.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), env.Kubectl(), "kustomize", filepath.Join(root, dir)).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	return parseObjects(t, dir, string(out))
}

// parseObjects splits a multi-document YAML stream into objects, leaving
// out empty documents.
func parseObjects(t *testing.T, what, stream string) []*unstructured.Unstructured {
	t.Helper()
	var objects []*unstructured.Unstructured
	for _, doc := range strings.Split("\n"+stream, "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, doc)
		}
		if len(u.Object) == 0 {
			continue
		}
		objects = append(objects, u)
	}
	return objects
}

// installNamespace is the kustomize install's namespace.
const installNamespace = "vidra-system"

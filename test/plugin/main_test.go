// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package plugin_test runs kubectl vidra, the binary, against a real API
// server with the operator running in-process: each test runs a command as a
// person would and compares what it prints with a golden file under
// testdata/ (ages, times, UIDs, resourceVersions and the test's namespace
// normalised). go test ./test/plugin/ -update rewrites the golden files.
package plugin_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/operator"
	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ with what the commands print")

const operatorNamespace = "vidra-system"

var (
	env   *testenv.Env
	kube  kubernetes.Interface
	vidra versioned.Interface
	// bin is the kubectl-vidra binary built for the suite; kubeconfig the
	// admin kubeconfig of the control plane, and home the HOME of every
	// run, so that nothing reads or writes the person's own.
	bin, kubeconfig, home string
)

func TestMain(m *testing.M) { testenv.RunMain(m, &env, testenv.Options{}, build, startOperator) }

// build builds kubectl-vidra into a temporary directory, as a person would
// build it, and writes the kubeconfig the runs use.
func build(ctx context.Context, e *testenv.Env) (func(), error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kubectl-vidra-test-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "kubectl-vidra")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/kubectl-vidra")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return nil, fmt.Errorf("go build ./cmd/kubectl-vidra: %w\n%s", err, out)
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := e.WriteKubeconfig(kubeconfig); err != nil {
		cleanup()
		return nil, err
	}
	home = filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		cleanup()
		return nil, err
	}
	return cleanup, nil
}

// startOperator runs the operator in-process, trusting every namespace as
// a single-tenant cluster does: the tests' resources live in namespaces of
// their own.
func startOperator(ctx context.Context, e *testenv.Env) (func(), error) {
	kube = kubernetes.NewForConfigOrDie(e.Config)
	vidra = versioned.NewForConfigOrDie(e.Config)
	_, stop, err := testenv.RunOperator(ctx, e, operator.Options{
		Namespace:         operatorNamespace,
		TrustedNamespaces: []string{destination.AllNamespaces},
		Workers:           2,
		Linger:            2 * time.Second,
	})
	return stop, err
}

// result is what one run of the binary printed, and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// run runs kubectl-vidra with args and the suite's kubeconfig.
func run(t *testing.T, args ...string) result {
	t.Helper()
	return runWith(t, kubeconfig, "", args...)
}

// runWith runs kubectl-vidra with args, the kubeconfig given and stdin.
func runWith(t *testing.T, kc, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kc}, args...)...)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1"}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		res.code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("run kubectl-vidra %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// expect fails the test unless the run ended with code.
func (r result) expect(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// namespace creates a namespace for one test, and deletes it (its
// resources first, while the operator runs their finalizers) afterwards.
func namespace(t *testing.T) string {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plugin-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = vidra.InfrahubV1alpha1().VidraResources(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

func isReady(vr *v1alpha1.VidraResource) bool {
	c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == vr.Generation && vr.Status.ObservedGeneration == vr.Generation
}

// healthy is isReady with every object's health known to be Current.
func healthy(vr *v1alpha1.VidraResource) bool {
	if !isReady(vr) {
		return false
	}
	for _, m := range vr.Status.ManagedResources {
		if m.Health != "Current" {
			return false
		}
	}
	return true
}

// normal says how golden compares: the strings to name by role (the
// test's namespace), whether to replace ages ("5s", "2m3s"), and whether
// to collapse runs of spaces, for tables whose column widths follow the
// ages in them (render's unit tests check the alignment).
type normal struct {
	names    map[string]string
	ages     bool
	collapse bool
}

var (
	uidRE  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	rvRE   = regexp.MustCompile(`(resourceVersion"?: )"\d+"`)
	// The bucket label hashes the resource's namespace, a new one per run.
	bucketRE   = regexp.MustCompile(`(vidraresource\.infrahub\.operators\.com/bucket"?: )"\d+"`)
	ageRE      = regexp.MustCompile(`\b\d+(s|m|h|d|y)(\d+(s|m|h))?\b`)
	countRE    = regexp.MustCompile(`\(x\d+\)`)
	serverRE   = regexp.MustCompile(`https://127\.0\.0\.1:\d+`)
	spacesRE   = regexp.MustCompile(`  +`)
	trailingRE = regexp.MustCompile(`(?m)[ \t]+$`)
)

// normalise replaces what changes from run to run with placeholders.
func normalise(s string, n normal) string {
	for from, to := range n.names {
		s = strings.ReplaceAll(s, from, to)
	}
	s = uidRE.ReplaceAllString(s, "<uid>")
	s = timeRE.ReplaceAllString(s, "<time>")
	s = rvRE.ReplaceAllString(s, `${1}"<rv>"`)
	s = bucketRE.ReplaceAllString(s, `${1}"<bucket>"`)
	s = serverRE.ReplaceAllString(s, "<server>")
	s = countRE.ReplaceAllString(s, "(x<n>)")
	if n.ages || n.collapse {
		s = ageRE.ReplaceAllString(s, "<age>")
	}
	if n.collapse {
		s = spacesRE.ReplaceAllString(s, "  ")
	}
	return trailingRE.ReplaceAllString(s, "")
}

// golden compares got, normalised, with testdata/name, or rewrites it with
// -update.
func golden(t *testing.T, name, got string, n normal) {
	t.Helper()
	got = normalise(got, n)
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; -update rewrites it):\n%s", path, diff)
	}
}

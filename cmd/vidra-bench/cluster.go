// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vidra-operator/vidra/internal/testenv"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

// operatorUser is the user name of the operator's client certificate; the
// audit policy records this user's requests and nobody else's.
const operatorUser = "vidra-bench-operator"

// kubectlUser is the user name the baseline's kubectl runs as. The audit
// policy records it like the operator, so that both pay the same audit cost
// per request.
const kubectlUser = "vidra-bench-kubectl"

// operatorNamespace is the operator's own namespace (--namespace).
const operatorNamespace = "vidra-system"

// auditPolicy records every request of the operator and of the baseline's
// kubectl at level Metadata (verb, resource, user, timestamps, no bodies)
// once it completes, and a watch once when it starts streaming. Nothing else
// is recorded, so the log stays small and the benchmark's own requests do
// not pay for it.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["` + operatorUser + `", "` + kubectlUser + `"]
- level: None
`

// cluster is the control plane, the operator process and the benchmark's own
// clients (admin: their requests are not counted).
type cluster struct {
	env        *testenv.Env
	dir        string
	auditLog   string
	kubeconfig string
	kube       kubernetes.Interface
	vidra      versioned.Interface
	config     *rest.Config
	op         *testenv.VidraProcess
}

func startCluster(ctx context.Context, dir string, profiling bool) (*cluster, error) {
	c := &cluster{dir: dir, auditLog: filepath.Join(dir, "audit.log")}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	env, err := testenv.Start(ctx, testenv.Options{
		StartTimeout: 3 * time.Minute,
		ExtraAPIServerArgs: []string{
			"--audit-policy-file=" + policy,
			"--audit-log-path=" + c.auditLog,
			"--audit-log-format=json",
			"--audit-log-maxsize=0",
			// The harness's /24 holds 254 Services; the benchmark creates two
			// per namespace pair. The later flag wins.
			"--service-cluster-ip-range=10.0.0.0/16",
			fmt.Sprintf("--profiling=%t", profiling),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	c.env = env
	// The benchmark's own clients must never be the bottleneck.
	c.config = rest.CopyConfig(env.Config)
	c.config.QPS, c.config.Burst = 2000, 4000
	if c.kube, err = kubernetes.NewForConfig(c.config); err != nil {
		return nil, err
	}
	if c.vidra, err = versioned.NewForConfig(c.config); err != nil {
		return nil, err
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := testenv.InstallCRDs(ctx, env.Config, filepath.Join(root, "manifests/crd/infrahub.operators.com_vidraresources.yaml")); err != nil {
		return nil, err
	}
	// Part of the install manifests: it adds the finalizer on create.
	if err := testenv.InstallFinalizerPolicy(ctx, env.Config); err != nil {
		return nil, err
	}
	_, err = c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create %s: %w", operatorNamespace, err)
	}
	// The operator acts as an administrator, as the install manifests'
	// ClusterRole lets it, but under a name of its own.
	c.kubeconfig = filepath.Join(dir, "operator.kubeconfig")
	if err := env.WriteUserKubeconfig(c.kubeconfig, operatorUser, "system:masters"); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *cluster) startOperator(ctx context.Context, binary string, args, env []string) error {
	op, err := testenv.StartVidra(testenv.VidraOptions{
		Binary:     binary,
		Kubeconfig: c.kubeconfig,
		Namespace:  operatorNamespace,
		LogPath:    filepath.Join(c.dir, "vidra.log"),
		Args:       append(benchFlags(), args...),
		Env:        env,
	})
	if err != nil {
		return err
	}
	c.op = op
	return op.WaitReady(ctx, 2*time.Minute)
}

// benchFlags are the operator's flags in every run. The bench's resources
// live in namespaces of their own and act as the operator, as a
// single-tenant cluster's do: impersonation would measure the API server's
// authorization of a ServiceAccount, not Vidra.
func benchFlags() []string {
	return []string{"--log-format=json", "--log-level=info", "--trusted-namespaces=*"}
}

func (c *cluster) stop() {
	if c.op != nil {
		c.op.Stop(15 * time.Second)
	}
	if c.env != nil {
		c.env.Stop()
	}
}

// cpuSeconds is the user and system CPU time a process has used so far, from
// /proc/<pid>/stat; it shows where the machine's two cores went.
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name in parentheses may hold spaces; fields count from
	// the closing parenthesis. utime and stime are fields 14 and 15.
	s := string(data)
	s = s[strings.LastIndexByte(s, ')')+2:]
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// cpuSnapshot is the CPU time of the operator and of each control plane
// process at one moment.
type cpuSnapshot map[string]float64

func (c *cluster) cpu() cpuSnapshot {
	s := cpuSnapshot{}
	for name, pid := range c.env.PIDs() {
		s[name] = cpuSeconds(pid)
	}
	if c.op != nil {
		s["vidra"] = cpuSeconds(c.op.PID())
	}
	return s
}

func (s cpuSnapshot) since(before cpuSnapshot) map[string]float64 {
	d := map[string]float64{}
	for k, v := range s {
		d[k] = round(v-before[k], 2)
	}
	return d
}

// profileAPIServer records a CPU profile of kube-apiserver over d into path,
// in the background, when on; the returned func waits for it.
func (c *cluster) profileAPIServer(ctx context.Context, on bool, d time.Duration, path string) (wait func()) {
	if !on {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		data, err := c.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(d.Seconds()))).Timeout(d + 30*time.Second).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(path, data, 0o600)
		}
		if err != nil {
			logf("kube-apiserver profile: %v", err)
		}
	}()
	return func() { <-done }
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Command localup gives a person a local Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager) with Vidra running against it and
// a sample applied, and tears everything down on Ctrl-C. `make run` calls it.
//
//	go build -o bin/localup ./hack/localup && bin/localup --vidra bin/vidra --sample manifests/samples/app.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vidra-operator/vidra/internal/testenv"
)

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "bin/local/kubeconfig", "where to write the admin kubeconfig")
	flag.StringVar(&o.vidra, "vidra", "bin/vidra", "the vidra binary to run; empty starts the control plane alone")
	flag.StringVar(&o.sample, "sample", "manifests/samples/app.yaml", "a VidraResource to apply once Vidra runs; empty applies none")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", "127.0.0.1:18080", "Vidra's /metrics address")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", "127.0.0.1:18081", "Vidra's /healthz and /readyz address")
	flag.StringVar(&o.standin, "infrahub-standin", "", "the infrahub-standin binary to run, with two artifacts and an InfrahubSync beside the sample; empty runs none")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "localup:", err)
		os.Exit(1)
	}
}

type options struct {
	kubeconfig, vidra, sample string
	metricsAddr, probeAddr    string
	standin                   string
}

// standinAddr is where the stand-in Infrahub of `make run` serves, as
// manifests/samples/infrahub/sync.yaml says.
const standinAddr = "127.0.0.1:18090"

// webhookAddr is where Vidra receives the stand-in's webhooks, and
// webhookKey their shared key, as manifests/samples/infrahub/sync.yaml says.
const (
	webhookAddr = "127.0.0.1:18443"
	webhookKey  = "sample-shared-key"
)

// startStandin copies the sample artifacts to dir, where a person edits
// them, and serves them with the stand-in Infrahub until ctx ends.
func startStandin(ctx context.Context, root, bin, dir string) (*exec.Cmd, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"--addr", standinAddr, "--artifact-name", "vidra-sample",
		// Vidra's receiver serves a self-signed certificate here.
		"--webhook-url", "https://" + webhookAddr + "/hooks/infrahub/vidra-system/sample-sync",
		"--webhook-shared-key", webhookKey, "--webhook-insecure-skip-verify"}
	for i, name := range []string{"router-1", "router-2"} {
		data, err := os.ReadFile(filepath.Join(root, "manifests/samples/infrahub", name+".yaml"))
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, err
		}
		// Infrahub's ids are UUIDs; these are as long, and say what they are.
		args = append(args, "--artifact", fmt.Sprintf("5a3c1e00-0000-4000-8000-00000000000%d=%s", i+1, path))
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the stand-in Infrahub: %w", err)
	}
	return cmd, nil
}

func run(ctx context.Context, o options) error {
	start := time.Now()
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return err
	}
	defer env.Stop()
	if err := os.MkdirAll(filepath.Dir(o.kubeconfig), 0o755); err != nil {
		return err
	}
	if err := env.WriteKubeconfig(o.kubeconfig); err != nil {
		return err
	}
	// The kubeconfig names this control plane's port and credentials: left
	// behind, it would point hack/tour.sh and kubectl at a dead server.
	defer os.Remove(o.kubeconfig)
	kubeconfig, _ := filepath.Abs(o.kubeconfig)
	artifactsDir := filepath.Join(filepath.Dir(kubeconfig), "artifacts")
	fmt.Printf("control plane %s ready in %s at %s\n", testenv.KubernetesVersion, time.Since(start).Round(time.Millisecond), env.Config.Host)

	kubectl := func(args ...string) error {
		cmd := exec.CommandContext(ctx, env.Kubectl(), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}

	var vidra *exec.Cmd
	exited := make(chan error, 1)
	if o.vidra != "" {
		if err := testenv.InstallCRDs(ctx, env.Config, filepath.Join(root, "manifests/crd/infrahub.operators.com_vidraresources.yaml"),
			filepath.Join(root, "manifests/crd/infrahub.operators.com_infrahubsyncs.yaml")); err != nil {
			return err
		}
		if err := testenv.InstallFinalizerPolicy(ctx, env.Config); err != nil {
			return err
		}
		if err := kubectl("apply", "-f", filepath.Join(root, "manifests/namespace.yaml"), "-f", filepath.Join(root, "manifests/manager/config.yaml")); err != nil {
			return fmt.Errorf("apply the operator's namespace and configuration: %w", err)
		}
		args := []string{"--kubeconfig", kubeconfig, "--namespace", "vidra-system",
			"--log-format", "console", "--metrics-bind-address", o.metricsAddr, "--health-probe-bind-address", o.probeAddr}
		if o.standin != "" {
			// The stand-in serves plain http on the loopback, and posts
			// its webhooks to the receiver.
			args = append(args, "--allow-http-destinations", "--webhook-bind-address", webhookAddr)
		}
		vidra = exec.CommandContext(ctx, o.vidra, args...)
		vidra.Stdout, vidra.Stderr = os.Stdout, os.Stderr
		// Vidra gets SIGTERM, not SIGKILL, when we stop: it releases its
		// watches and exits cleanly.
		vidra.Cancel = func() error { return vidra.Process.Signal(syscall.SIGTERM) }
		vidra.WaitDelay = 10 * time.Second
		vidra.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
		if err := vidra.Start(); err != nil {
			return fmt.Errorf("start vidra: %w", err)
		}
		go func() { exited <- vidra.Wait() }()
		if o.sample != "" {
			// The samples live in the operator's namespace, the one it
			// trusts by default: Vidra runs here with the shipped defaults.
			if err := kubectl("apply", "-f", o.sample); err != nil {
				return fmt.Errorf("apply sample: %w", err)
			}
			if err := kubectl("wait", "-A", "--for=condition=Ready", "vr", "--all", "--timeout=60s"); err != nil {
				return fmt.Errorf("sample did not become Ready: %w", err)
			}
			_ = kubectl("get", "vr", "-A", "-o", "wide")
		}
		if o.standin != "" {
			standin, err := startStandin(ctx, root, o.standin, artifactsDir)
			if err != nil {
				return err
			}
			defer func() { _ = standin.Wait() }()
			if err := kubectl("apply", "-f", filepath.Join(root, "manifests/samples/infrahub/sync.yaml")); err != nil {
				return fmt.Errorf("apply the InfrahubSync sample: %w", err)
			}
			if err := kubectl("wait", "-n", "vidra-system", "--for=condition=Ready", "infrahubsync/sample-sync", "--timeout=60s"); err != nil {
				return fmt.Errorf("the InfrahubSync sample did not become Ready: %w", err)
			}
			_ = kubectl("get", "infrahubsync,vr", "-n", "vidra-system")
		}
	} else {
		fmt.Println("started the control plane alone (--vidra is empty)")
	}

	if o.standin != "" {
		fmt.Printf(`
An InfrahubSync follows a stand-in Infrahub (%s): each change of an artifact
is posted, signed, to Vidra's webhook receiver (https://%s), which wakes the
sync for that artifact alone; the poll (every 1m here) catches deletions,
for which Infrahub sends no event. Change an artifact and watch it arrive:

  kubectl vidra tree infrahubsync/sample-sync -n vidra-system
  sed -i 's/10.0.0.1/10.0.0.2/' %s
  kubectl get configmap router-1-config -n vidra-system -o yaml -w
  rm %s                   # the artifact leaves Infrahub: its resource goes at the next poll
  kubectl vidra sync sample-sync -n vidra-system  # poll now
  curl -s http://%s/metrics | grep -E 'vidra_infrahubsync_(webhooks|reconciles)_total'
`, standinAddr, webhookAddr, filepath.Join(artifactsDir, "router-1.yaml"), filepath.Join(artifactsDir, "router-2.yaml"), o.metricsAddr)
	}

	bin := filepath.Join(root, "bin", "controlplane", testenv.KubernetesVersion)
	fmt.Printf(`
Vidra is running against a local control plane. In another shell:

  export KUBECONFIG=%s PATH=%s:%s:$PATH
  kubectl get vr -A -o wide                       # READY, HEALTHY, STATUS, MANAGED
  kubectl vidra tree sample-app -n vidra-system   # each object, its health and drift
  kubectl -n demo delete configmap web-config     # break something ...
  kubectl -n demo get configmap web-config        # ... and it is back
  kubectl -n demo label service web hand=made     # a hand edit, taken back
  kubectl -n demo get service web --show-labels
  kubectl wait -n vidra-system --for=condition=Ready vr/sample-app
  kubectl apply -f manifests/samples/tenant.yaml  # a tenant acts as its ServiceAccount
  curl -s http://%s/metrics | grep vidra_         # reconciles, drift corrections

Press Ctrl-C to stop; everything started here is removed.
`, kubeconfig, bin, filepath.Join(root, "bin"), o.metricsAddr)

	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Println("stopping")
			if vidra != nil {
				<-exited
			}
			return nil
		case err := <-exited:
			return fmt.Errorf("vidra exited: %v", err)
		case <-tick.C:
			if err := env.Healthy(); err != nil {
				return err
			}
		}
	}
}

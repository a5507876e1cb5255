// Command localup starts a local control plane (etcd, kube-apiserver,
// kube-controller-manager) for a person to use, writes an admin kubeconfig and
// keeps running until interrupted, then tears everything down.
//
//	go run ./hack/localup --kubeconfig bin/local/kubeconfig
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vidra-operator/vidra/internal/testenv"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "bin/local/kubeconfig", "where to write the admin kubeconfig")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "localup:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig string) error {
	start := time.Now()
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return err
	}
	defer env.Stop()
	if err := os.MkdirAll(filepath.Dir(kubeconfig), 0o755); err != nil {
		return err
	}
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	abs, _ := filepath.Abs(kubeconfig)
	fmt.Printf("control plane %s ready in %s at %s\n", testenv.KubernetesVersion, time.Since(start).Round(time.Millisecond), env.Config.Host)
	fmt.Printf("\n  export KUBECONFIG=%s\n  export PATH=$PWD/bin/controlplane/%s:$PATH   # kubectl\n\n", abs, testenv.KubernetesVersion)
	fmt.Println("Press Ctrl-C to stop it; everything it started is removed.")

	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Println("stopping control plane")
			return nil
		case <-tick.C:
			if err := env.Healthy(); err != nil {
				return err
			}
		}
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Command secretref runs the example operator of package secretref on the
// ConfigMaps of one namespace.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vidra-operator/vidra/examples/secretref"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig; empty for in-cluster")
	namespace := flag.String("namespace", "default", "the namespace whose ConfigMaps to reconcile")
	flag.Parse()
	if err := run(*kubeconfig, *namespace); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(kubeconfig, namespace string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	op, err := secretref.New(cs, md, namespace, logr.Discard())
	if err != nil {
		return err
	}
	return op.Run(ctx, 2)
}

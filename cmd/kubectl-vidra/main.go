// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Command kubectl-vidra is kubectl vidra, the kubectl plugin of Vidra: on the
// PATH, kubectl runs it for `kubectl vidra ...`. The commands live in
// internal/plugin/commands; docs/plugin.md describes them.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/vidra-operator/vidra/internal/plugin/commands"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := commands.Execute(ctx, genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

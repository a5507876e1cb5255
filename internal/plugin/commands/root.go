// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/vidra-operator/vidra/internal/plugin/render"
)

// fieldManager is the field manager of every write of kubectl vidra: a name
// of its own, so that managedFields tell its writes from kubectl's and the
// operator's.
const fieldManager = "kubectl-vidra"

// root holds what every command shares: kubectl's connection flags and the
// streams.
type root struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
}

// NewRoot builds kubectl vidra with its subcommands, writing to streams.
func NewRoot(streams genericiooptions.IOStreams) *cobra.Command {
	r := &root{flags: genericclioptions.NewConfigFlags(true), streams: streams}
	cmd := &cobra.Command{
		Use:   "kubectl-vidra",
		Short: "See, preview and steer VidraResources",
		Long: `kubectl vidra shows VidraResources and the objects they manage, previews what an
apply would change, and steers the operator (reconcile, suspend, resume), with
kubectl's flags and conventions.`,
		Example: `  kubectl vidra get -A
  kubectl vidra tree sample-app -n vidra-system
  kubectl vidra diff sample-app -n vidra-system -f app/`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl vidra"},
	}
	r.flags.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(
		newGet(r), newTree(r), newDiff(r), newReconcile(r), newSuspend(r, true), newSuspend(r, false),
		newWhy(r), newCluster(r), newCreate(r), newVersion(r), newWakeups(r),
	)
	// The completion command cobra adds: give it its example too.
	cmd.InitDefaultCompletionCmd()
	for _, c := range cmd.Commands() {
		if c.Name() == "completion" {
			c.Example = `  source <(kubectl-vidra completion bash)
  kubectl-vidra completion zsh > "${fpath[1]}/_kubectl-vidra"`
		}
	}
	return cmd
}

// Execute runs kubectl vidra with args until ctx ends, and returns the
// process's exit code.
func Execute(ctx context.Context, streams genericiooptions.IOStreams, args []string) int {
	cmd := NewRoot(streams)
	cmd.SetArgs(args)
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	// An error may quote what an API server answered, or the names of
	// the objects of a manifest: SafeText keeps its lines, and nothing
	// else a terminal would act on.
	var exit *exitError
	if errors.As(err, &exit) {
		if exit.err != nil {
			fmt.Fprintf(streams.ErrOut, "error: %s\n", render.SafeText(exit.err.Error()))
		}
		return exit.code
	}
	fmt.Fprintf(streams.ErrOut, "error: %s\n", render.SafeText(err.Error()))
	return 1
}

// exitError ends the process with code, after printing err if any.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit code %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exit wraps err to end the process with code.
func exit(code int, err error) error { return &exitError{code: code, err: err} }

// color tells whether to colour the output: only on a terminal that is not
// dumb, and never with NO_COLOR set, as kubectl decides.
func (r *root) color() bool { return printers.AllowsColorOutput(r.streams.Out) }

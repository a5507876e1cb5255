// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vidra-operator/vidra/internal/plugin/clusterconfig"
	"github.com/vidra-operator/vidra/internal/plugin/render"
)

// kubeconfigKey is the key of the Secret that holds the kubeconfig, the
// default of spec.destination.kubeconfigSecretRef.key.
const kubeconfigKey = "kubeconfig"

func newCluster(r *root) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "cluster",
		Short:   "Manage the remote clusters VidraResources deploy to",
		Example: `  kubectl vidra cluster add staging --context staging-admin -n team-a`,
	}
	cmd.AddCommand(newClusterAdd(r))
	return cmd
}

func newClusterAdd(r *root) *cobra.Command {
	var (
		fromContext string
		dryRun      string
		output      string
	)
	cmd := &cobra.Command{
		Use:   "add NAME --context CONTEXT",
		Short: "Create the kubeconfig Secret of a remote destination from a context of your kubeconfig",
		Long: `Create Secret NAME, in the namespace of the VidraResources that will deploy to
the cluster, holding the kubeconfig of context CONTEXT: only that context, its
cluster and its user (minified), with the files it names inlined (certificate
authority, client certificate and key, token file). The operator refuses, and
so does this command, what a kubeconfig from a Secret must not do inside it:
credential plugins (exec), auth-provider plugins, file paths, proxies.

--context here names the context to export; the Secret is written through the
kubeconfig's current context (the cluster Vidra runs in). It prints the
spec.destination stanza to use.`,
		Example: `  # A Secret for namespace team-a from context staging-admin
  kubectl vidra cluster add staging --context staging-admin -n team-a

  # Only show the Secret
  kubectl vidra cluster add staging --context staging-admin --dry-run=client -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "", "json", "yaml", "name"); err != nil {
				return err
			}
			if err := checkDryRun(dryRun); err != nil {
				return err
			}
			raw, err := r.flags.ToRawKubeConfigLoader().RawConfig()
			if err != nil {
				return err
			}
			exported, err := clusterconfig.Export(&raw, fromContext)
			if err != nil {
				return err
			}
			ns, err := r.namespace()
			if err != nil {
				return err
			}
			secret := &corev1.Secret{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: metav1.ObjectMeta{Name: args[0], Namespace: ns},
				Type:       corev1.SecretTypeOpaque,
				Data:       map[string][]byte{kubeconfigKey: exported.Kubeconfig},
			}
			if dryRun != "client" {
				c, err := r.clients()
				if err != nil {
					return err
				}
				opts := metav1.CreateOptions{FieldManager: fieldManager}
				if dryRun == "server" {
					opts.DryRun = []string{metav1.DryRunAll}
				}
				if secret, err = c.kube.CoreV1().Secrets(ns).Create(cmd.Context(), secret, opts); err != nil {
					return fmt.Errorf("create secret %s/%s: %w", ns, args[0], err)
				}
			}
			if output != "" {
				return printObject(r.streams.Out, secret, output)
			}
			name, server := render.Safe(args[0]), render.Safe(exported.Server)
			fmt.Fprintf(r.streams.Out, "secret/%s created in namespace %s%s\n", name, render.Safe(ns), dryRunNote(dryRun))
			fmt.Fprintf(r.streams.Out, "Deploy to %s from a VidraResource of namespace %s with:\n\n", server, render.Safe(ns))
			fmt.Fprintf(r.streams.Out, "  destination:\n    server: %s\n    kubeconfigSecretRef:\n      name: %s\n      key: %s\n",
				server, name, kubeconfigKey)
			return nil
		},
	}
	cmd.Flags().StringVar(&fromContext, "context", "", "The context of your kubeconfig whose cluster and user the Secret holds.")
	_ = cmd.RegisterFlagCompletionFunc("context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		raw, err := r.flags.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for n := range raw.Contexts {
			names = append(names, n)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	addDryRun(cmd, &dryRun)
	addOutput(cmd, &output, "", "json", "yaml", "name")
	return cmd
}

// addDryRun adds kubectl's --dry-run flag.
func addDryRun(cmd *cobra.Command, dryRun *string) {
	cmd.Flags().StringVar(dryRun, "dry-run", "none", `Must be "none", "server", or "client". With client, only print the object; with server, send it without persisting it.`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "client"
}

func checkDryRun(dryRun string) error {
	switch dryRun {
	case "none", "client", "server":
		return nil
	}
	return errors.New(`--dry-run must be "none", "server" or "client"`)
}

func dryRunNote(dryRun string) string {
	switch dryRun {
	case "client":
		return " (dry run)"
	case "server":
		return " (server dry run)"
	}
	return ""
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

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
		Example: `  kubectl vidra cluster add staging --context staging-deployer -n team-a`,
	}
	cmd.AddCommand(newClusterAdd(r))
	return cmd
}

func newClusterAdd(r *root) *cobra.Command {
	var (
		fromContext string
		dryRun      string
		output      string
		embedFiles  bool
		yes         bool
	)
	cmd := &cobra.Command{
		Use:   "add NAME --context CONTEXT",
		Short: "Create the kubeconfig Secret of a remote destination from a context of your kubeconfig",
		Long: `Create Secret NAME, in the namespace of the VidraResources that will deploy to
the cluster, holding the kubeconfig of context CONTEXT: only that context, its
cluster and its user (minified). The operator refuses, and so does this
command, what a kubeconfig from a Secret must not do inside it: credential
plugins (exec), auth-provider plugins, file paths, proxies.

A context that names files (certificate-authority, client-certificate,
client-key, tokenFile) is refused unless --embed-files asks to inline them: a
kubeconfig merged from several files may name any file of this machine.

Everyone who may read Secrets in the namespace (the edit role, for one) can use
the identity the Secret holds. Before writing it, the command asks the
context's cluster, as that identity, whether it is in system:masters or may do
anything, escalate or bind ClusterRoles, or impersonate users or groups; if so,
it refuses unless --yes, and says how to use a ServiceAccount with a scoped
role instead.

--context here names the context to export; the Secret is written through the
kubeconfig's current context (the cluster Vidra runs in). It prints the
spec.destination stanza to use.`,
		Example: `  # A Secret for namespace team-a from context staging-deployer
  kubectl vidra cluster add staging --context staging-deployer -n team-a

  # Only show the Secret
  kubectl vidra cluster add staging --context staging-deployer --dry-run=client -o yaml

  # A context whose certificates are files
  kubectl vidra cluster add staging --context staging-files --embed-files -n team-a`,
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
			exported, err := clusterconfig.Export(&raw, fromContext, clusterconfig.Options{EmbedFiles: embedFiles})
			if err != nil {
				return err
			}
			ns, err := r.namespace()
			if err != nil {
				return err
			}
			id, reviewErr := reviewIdentity(cmd.Context(), exported.Kubeconfig, r.streams.ErrOut)
			decision := clusterconfig.Decide(fromContext, ns, id, reviewErr, yes)
			if decision.Refused != nil {
				return decision.Refused
			}
			if decision.Warning != "" {
				fmt.Fprintln(r.streams.ErrOut, render.SafeText(decision.Warning))
			}
			for _, f := range exported.Inlined {
				fmt.Fprintf(r.streams.ErrOut, "Inlined %s\n", render.Safe(f))
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
	cmd.Flags().BoolVar(&embedFiles, "embed-files", false, "Inline the files the context names (certificate authority, client certificate and key, token file) into the Secret.")
	cmd.Flags().BoolVar(&yes, "yes", false, "Write the Secret even when the context's identity can do more than a destination needs, or that cannot be checked.")
	addDryRun(cmd, &dryRun)
	addOutput(cmd, &output, "", "json", "yaml", "name")
	return cmd
}

// reviewTimeout bounds the questions cluster add puts to the destination
// about the exported identity: six requests.
const reviewTimeout = 30 * time.Second

// reviewIdentity asks the cluster of kubeconfig, as its identity, what it
// may do.
func reviewIdentity(ctx context.Context, kubeconfig []byte, errOut io.Writer) (*clusterconfig.Identity, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = fieldManager + "/" + version()
	cfg.WarningHandler = warnings{errOut}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	return clusterconfig.Review(ctx, c)
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

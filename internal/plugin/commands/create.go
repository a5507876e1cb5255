// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vidra-operator/vidra/internal/plugin/pack"
	"github.com/vidra-operator/vidra/internal/plugin/render"
	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func newCreate(r *root) *cobra.Command {
	var (
		files          []string
		destNamespace  string
		serviceAccount string
		interval       metav1.Duration
		dryRun         string
		output         string
		configMaps     bool
	)
	cmd := &cobra.Command{
		Use:   "create NAME -f FILE|DIR",
		Short: "Create a VidraResource from local YAML files",
		Long: `Create a VidraResource whose manifest is the given files, packed into one
multi-document manifest: a directory stands for its *.yaml, *.yml and *.json
files in lexical order (not its subdirectories). Each file is first checked
with the operator's own manifest parser; an error names the file, the document
and the line.

A manifest over 256 KiB (or any, with --configmaps) goes into gzip-compressed
ConfigMaps named NAME-manifest-N, at most 768 KiB of gzip each and 16 in all,
that the resource reads through spec.manifestFrom and owns: they are deleted
with it. The whole may hold 3 MiB of text.`,
		Example: `  # Deploy the files of app/ to namespace demo, from a resource in vidra-system
  kubectl vidra create web -n vidra-system -f app/ --destination-namespace demo

  # Only show the resource
  kubectl vidra create web -f app/ --dry-run=client -o yaml

  # A published bundle, too large for one object: ConfigMaps and the resource
  kubectl vidra create argocd -n argocd -f install.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "", "json", "yaml", "name"); err != nil {
				return err
			}
			if err := checkDryRun(dryRun); err != nil {
				return err
			}
			in, err := pack.Read(files, r.streams.In)
			if err != nil {
				return err
			}
			m, err := pack.Pack(in)
			if err != nil {
				return fmt.Errorf("the manifest does not parse:\n%w", err)
			}
			ns, err := r.namespace()
			if err != nil {
				return err
			}
			vr := &v1alpha1.VidraResource{
				TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "VidraResource"},
				ObjectMeta: metav1.ObjectMeta{Name: args[0], Namespace: ns},
				Spec: v1alpha1.VidraResourceSpec{
					Manifest:           m.Text,
					Destination:        v1alpha1.Destination{Namespace: destNamespace},
					ServiceAccountName: serviceAccount,
				},
			}
			if cmd.Flags().Changed("interval") {
				vr.Spec.Interval = &interval
			}
			var cms []*corev1.ConfigMap
			if configMaps || len(m.Text) > pack.InlineMax {
				chunks, err := pack.Bundle(m.Text)
				if err != nil {
					return err
				}
				if cms, err = bundleConfigMaps(vr, chunks); err != nil {
					return err
				}
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
				create := func() (*v1alpha1.VidraResource, error) {
					out, err := c.vidra.InfrahubV1alpha1().VidraResources(ns).Create(cmd.Context(), vr, opts)
					if err != nil {
						return nil, fmt.Errorf("create vidraresource %s/%s: %w", ns, args[0], err)
					}
					return out, nil
				}
				if vr, err = createBundle(cmd.Context(), c.kube, create, cms, opts); err != nil {
					return err
				}
			}
			if output != "" {
				for _, cm := range cms {
					if err := printObject(r.streams.Out, cm, output); err != nil {
						return err
					}
					if output == "yaml" {
						fmt.Fprintln(r.streams.Out, "---")
					}
				}
				return printObject(r.streams.Out, vr, output)
			}
			for _, cm := range cms {
				fmt.Fprintf(r.streams.Out, "configmap/%s created (%d bytes of gzip)%s\n", render.Safe(cm.Name), len(cm.BinaryData[bundleKey]), dryRunNote(dryRun))
			}
			fmt.Fprintf(r.streams.Out, "vidraresource.%s/%s created (%s from %s)%s\n",
				v1alpha1.GroupName, render.Safe(vr.Name), wording.Count(len(m.Objects), "object"), wording.Count(len(m.Files), "file"), dryRunNote(dryRun))
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "Files or directories of the manifest; - reads stdin.")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	_ = cmd.MarkFlagRequired("filename")
	cmd.Flags().StringVar(&destNamespace, "destination-namespace", "", "spec.destination.namespace: the namespace of namespaced objects that carry none (default: the resource's).")
	cmd.Flags().StringVar(&serviceAccount, "service-account", "", "spec.serviceAccountName: the ServiceAccount of the resource's namespace Vidra acts as.")
	cmd.Flags().DurationVar(&interval.Duration, "interval", 0, "spec.interval: the periodic re-check, 0 to turn it off (default: the operator's).")
	cmd.Flags().BoolVar(&configMaps, "configmaps", false, "Put the manifest in gzip-compressed ConfigMaps (spec.manifestFrom) whatever its size; without it, only a manifest over 256 KiB goes there.")
	addDryRun(cmd, &dryRun)
	addOutput(cmd, &output, "", "json", "yaml", "name")
	return cmd
}

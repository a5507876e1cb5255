// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"fmt"

	"github.com/spf13/cobra"
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
	)
	cmd := &cobra.Command{
		Use:   "create NAME -f FILE|DIR",
		Short: "Create a VidraResource from local YAML files",
		Long: `Create a VidraResource whose manifest is the given files, packed into one
multi-document manifest: a directory stands for its *.yaml, *.yml and *.json
files in lexical order (not its subdirectories). Each file is first checked
with the operator's own manifest parser; an error names the file, the document
and the line.`,
		Example: `  # Deploy the files of app/ to namespace demo, from a resource in vidra-system
  kubectl vidra create web -n vidra-system -f app/ --destination-namespace demo

  # Only show the resource
  kubectl vidra create web -f app/ --dry-run=client -o yaml`,
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
			if dryRun != "client" {
				c, err := r.clients()
				if err != nil {
					return err
				}
				opts := metav1.CreateOptions{FieldManager: fieldManager}
				if dryRun == "server" {
					opts.DryRun = []string{metav1.DryRunAll}
				}
				if vr, err = c.vidra.InfrahubV1alpha1().VidraResources(ns).Create(cmd.Context(), vr, opts); err != nil {
					return fmt.Errorf("create vidraresource %s/%s: %w", ns, args[0], err)
				}
			}
			if output != "" {
				return printObject(r.streams.Out, vr, output)
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
	addDryRun(cmd, &dryRun)
	addOutput(cmd, &output, "", "json", "yaml", "name")
	return cmd
}

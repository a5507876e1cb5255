// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vidra-operator/vidra/internal/plugin/render"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func newGet(r *root) *cobra.Command {
	var (
		all      bool
		output   string
		selector string
		chunk    int64
	)
	cmd := &cobra.Command{
		Use:   "get [NAME]",
		Short: "List VidraResources with the health and drift of their objects, and InfrahubSyncs",
		Long: `List VidraResources as kubectl get vr does, with how many managed objects are
healthy (kstatus Current), how many differ from the manifest now (driftPolicy
Report) and how many drift corrections the history holds.`,
		Example: `  # The resources of the current namespace
  kubectl vidra get

  # Every namespace, with the Ready message
  kubectl vidra get -A -o wide

  # One resource as YAML
  kubectl vidra get sample-app -n vidra-system -o yaml`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: r.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "", "wide", "json", "yaml", "name"); err != nil {
				return err
			}
			c, err := r.clients()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var items []v1alpha1.VidraResource
			if len(args) == 1 {
				if all {
					return fmt.Errorf("a resource cannot be retrieved by name across all namespaces")
				}
				vr, err := c.get(ctx, args[0])
				if err != nil {
					return err
				}
				if output != "" && output != "wide" {
					return printObject(r.streams.Out, vr, output)
				}
				items = []v1alpha1.VidraResource{*vr}
			} else {
				ns := c.namespace
				if all {
					ns = metav1.NamespaceAll
				}
				list := &v1alpha1.VidraResourceList{}
				err := c.list(ctx, ns, selector, chunk, func(vr *v1alpha1.VidraResource) error {
					if output == "name" {
						return printObject(r.streams.Out, vr, output)
					}
					if output == "" || output == "wide" {
						// The table shows no manifest: do not hold
						// thousands of them until it is printed.
						vr.Spec.Manifest = ""
					}
					list.Items = append(list.Items, *vr)
					return nil
				})
				if err != nil {
					return err
				}
				if output == "name" {
					return nil
				}
				if output != "" && output != "wide" {
					return printObject(r.streams.Out, list, output)
				}
				if len(list.Items) == 0 {
					if all {
						fmt.Fprintln(r.streams.ErrOut, "No resources found")
					} else {
						fmt.Fprintf(r.streams.ErrOut, "No resources found in %s namespace.\n", render.Safe(ns))
					}
					return printSyncs(ctx, r.streams.Out, c, ns, all)
				}
				items = list.Items
			}
			if err := render.Table(r.streams.Out, items, render.TableOptions{
				Options:       render.Options{Now: time.Now(), Color: r.color()},
				AllNamespaces: all,
				Wide:          output == "wide",
			}); err != nil || len(args) == 1 {
				return err
			}
			ns := c.namespace
			if all {
				ns = metav1.NamespaceAll
			}
			return printSyncs(ctx, r.streams.Out, c, ns, all)
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List the resources of every namespace.")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "Label selector to filter on, such as team=web.")
	cmd.Flags().Int64Var(&chunk, "chunk-size", defaultChunkSize, "List the resources this many at a time, as kubectl get does; 0 lists them in one request.")
	addOutput(cmd, &output, "", "wide", "json", "yaml", "name")
	return cmd
}

func newTree(r *root) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "tree NAME | infrahubsync/NAME",
		Short: "Show a VidraResource and each object it manages, with health, drift and conflicts",
		Long: `Show a VidraResource and, as a tree below it, each object it manages: its health
(kstatus), the last drift correction of it (when, which fields, and who changed
them, from status.driftHistory; with driftPolicy Report, how it differs now,
from status.drift), and the conflicts the resource reports about it.`,
		Example: `  kubectl vidra tree sample-app -n vidra-system

  # An InfrahubSync, the VidraResources of its artifacts and their objects
  kubectl vidra tree infrahubsync/devices -n network

  # The same as JSON, for scripts
  kubectl vidra tree sample-app -n vidra-system -o json`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "", "json", "yaml"); err != nil {
				return err
			}
			c, err := r.clients()
			if err != nil {
				return err
			}
			if name, ok := syncName(args[0]); ok && output == "" {
				return writeSyncTree(cmd.Context(), r.streams.Out, c, name)
			}
			vr, err := c.get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			t := render.NewTree(vr)
			if output != "" {
				return printData(r.streams.Out, t, output)
			}
			return render.WriteTree(r.streams.Out, t, render.Options{Now: time.Now(), Color: r.color()})
		},
	}
	addOutput(cmd, &output, "", "json", "yaml")
	return cmd
}

func newWhy(r *root) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "why NAME",
		Short: "Explain on one screen why a VidraResource is not Ready",
		Long: `Explain why a VidraResource is not Ready: its conditions, the objects that fail
with the API server's or the health check's message, its recent Warning Events,
and when Vidra tries again (or, where the operator does not publish that, what
makes it try).`,
		Example:           `  kubectl vidra why web -n team-a`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "", "json", "yaml"); err != nil {
				return err
			}
			c, err := r.clients()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			vr, err := c.get(ctx, args[0])
			if err != nil {
				return err
			}
			events, err := c.kube.CoreV1().Events(vr.Namespace).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.kind=VidraResource,involvedObject.name=" + vr.Name + ",type=Warning",
			})
			if err != nil {
				return fmt.Errorf("list the events of vidraresource %s/%s: %w", vr.Namespace, vr.Name, err)
			}
			now := time.Now()
			x := render.Explain(vr, events.Items, now)
			if output != "" {
				return printData(r.streams.Out, x, output)
			}
			return render.WriteExplanation(r.streams.Out, x, render.Options{Now: now, Color: r.color()})
		},
	}
	addOutput(cmd, &output, "", "json", "yaml")
	return cmd
}

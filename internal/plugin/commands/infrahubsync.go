// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/vidra-operator/vidra/internal/plugin/render"
	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// syncPrefixes name an InfrahubSync where a command takes a VidraResource:
// kubectl vidra tree infrahubsync/devices.
var syncPrefixes = []string{"infrahubsync/", "infrahubsyncs/", "ihs/"}

// syncName returns the name of arg when it names an InfrahubSync.
func syncName(arg string) (string, bool) {
	for _, p := range syncPrefixes {
		if name, ok := strings.CutPrefix(arg, p); ok {
			return name, true
		}
	}
	return "", false
}

func newSync(r *root) *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "sync NAME",
		Short: "Ask the operator to poll an InfrahubSync now, and wait for the outcome",
		Long: `Ask the operator to poll an InfrahubSync's Infrahub now: set its annotation
` + v1alpha1.RequestedAtAnnotation + ` to the current time (the sync's credentials
Secret is read again too) and, with --wait, wait until status.lastHandledReconcileAt
echoes it, then print the Ready condition. Exits 1 when the sync is not Ready.`,
		Example: `  kubectl vidra sync devices -n network

  # Ask, and do not wait
  kubectl vidra sync devices -n network --wait=false`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := r.clients()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			client := c.vidra.InfrahubV1alpha1().InfrahubSyncs(c.namespace)
			s, err := client.Get(ctx, args[0], metav1.GetOptions{})
			if err != nil {
				return err
			}
			if s.Spec.Suspend {
				return fmt.Errorf("infrahubsync %s/%s is suspended, so the operator would not poll it: set spec.suspend to false first", s.Namespace, s.Name)
			}
			value := time.Now().UTC().Format(time.RFC3339Nano)
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.RequestedAtAnnotation: value}}})
			if err != nil {
				return err
			}
			if _, err := client.Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
				return fmt.Errorf("request a poll of infrahubsync %s/%s: %w", s.Namespace, s.Name, err)
			}
			if !wait {
				fmt.Fprintf(r.streams.Out, "infrahubsync.%s/%s poll requested at %s\n", v1alpha1.GroupName, render.Safe(s.Name), value)
				return nil
			}
			fmt.Fprintf(r.streams.ErrOut, "infrahubsync.%s/%s poll requested at %s; waiting for the operator\n", v1alpha1.GroupName, render.Safe(s.Name), value)
			done, err := waitSyncHandled(ctx, c, s.Namespace, s.Name, value, timeout)
			if err != nil {
				return err
			}
			ready := meta.FindStatusCondition(done.Status.Conditions, v1alpha1.ConditionReady)
			if ready == nil {
				return exit(1, fmt.Errorf("infrahubsync %s/%s has no Ready condition", done.Namespace, done.Name))
			}
			fmt.Fprintf(r.streams.Out, "infrahubsync.%s/%s %s: %s (%s)\n", v1alpha1.GroupName, render.Safe(done.Name), ready.Reason, render.Safe(ready.Message), wording.Count(int(done.Status.ArtifactCount), "artifact"))
			if ready.Status != metav1.ConditionTrue {
				return exit(1, nil)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", true, "Wait until the operator has handled the request, and print the outcome.")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "How long to wait for the operator.")
	return cmd
}

// waitSyncHandled polls the sync until its status echoes value for its
// current generation. A poll, not a watch: one object, a second apart at
// most, for the time a person waits.
func waitSyncHandled(ctx context.Context, c *clients, ns, name, value string, timeout time.Duration) (*v1alpha1.InfrahubSync, error) {
	var last *v1alpha1.InfrahubSync
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		s, err := c.vidra.InfrahubV1alpha1().InfrahubSyncs(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			return false, err
		}
		if err != nil {
			lastErr = err
			return false, nil
		}
		last = s
		return s.Status.LastHandledReconcileAt == value && s.Status.ObservedGeneration == s.Generation, nil
	})
	if err != nil {
		if last == nil && lastErr != nil {
			return nil, fmt.Errorf("wait for infrahubsync %s/%s: %w", ns, name, lastErr)
		}
		return nil, fmt.Errorf("infrahubsync %s/%s did not handle the request within %s: is the operator running? (%w)", ns, name, timeout, err)
	}
	return last, nil
}

// printSyncs lists the InfrahubSyncs of ns below the VidraResources of
// kubectl vidra get; nothing when there are none or the API server does
// not serve them.
func printSyncs(ctx context.Context, out io.Writer, c *clients, ns string, all bool) error {
	list, err := c.vidra.InfrahubV1alpha1().InfrahubSyncs(ns).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(list.Items) == 0 {
		return nil
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	if all {
		fmt.Fprint(w, "NAMESPACE\t")
	}
	fmt.Fprintln(w, "INFRAHUBSYNC\tREADY\tSTATUS\tARTIFACTS\tBRANCH\tLAST SYNC\tAGE")
	now := time.Now()
	for _, s := range list.Items {
		if all {
			fmt.Fprintf(w, "%s\t", render.Safe(s.Namespace))
		}
		ready := "Unknown"
		if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			ready = string(c.Status)
		}
		last := "<never>"
		if s.Status.LastSyncTime != nil {
			last = duration.HumanDuration(now.Sub(s.Status.LastSyncTime.Time))
		}
		branch := s.Spec.Source.TargetBranch
		if branch == "" {
			branch = "main"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", render.Safe(s.Name), ready, render.Safe(string(s.Status.SyncState)), s.Status.ArtifactCount,
			render.Safe(branch), last, duration.HumanDuration(now.Sub(s.CreationTimestamp.Time)))
	}
	return w.Flush()
}

// writeSyncTree prints a sync, the VidraResources it owns, and the objects
// each manages.
func writeSyncTree(ctx context.Context, out io.Writer, c *clients, name string) error {
	s, err := c.vidra.InfrahubV1alpha1().InfrahubSyncs(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
	fmt.Fprintf(out, "InfrahubSync %s/%s", render.Safe(s.Namespace), render.Safe(s.Name))
	if ready != nil {
		fmt.Fprintf(out, "  %s %s: %s", ready.Status, ready.Reason, render.Safe(ready.Message))
	}
	fmt.Fprintln(out)
	vrs, err := c.vidra.InfrahubV1alpha1().VidraResources(s.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.SyncNameLabel: s.Name}).String(),
	})
	if err != nil {
		return err
	}
	problems := map[string]string{}
	for _, a := range s.Status.Artifacts {
		if a.Problem != "" {
			problems[a.ID] = a.Problem
		}
	}
	var owned []v1alpha1.VidraResource
	for _, vr := range vrs.Items {
		if ref := metav1.GetControllerOf(&vr); ref != nil && ref.UID == s.UID {
			owned = append(owned, vr)
		}
	}
	for i, vr := range owned {
		branch, indent := "├── ", "│   "
		if i == len(owned)-1 {
			branch, indent = "└── ", "    "
		}
		state := "Unknown"
		if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			state = string(c.Status) + " " + c.Reason
		}
		fmt.Fprintf(out, "%sVidraResource %s  %s  (artifact %s)\n", branch, render.Safe(vr.Name), state, render.Safe(vr.Annotations[v1alpha1.ArtifactNameAnnotation]))
		for j, m := range vr.Status.ManagedResources {
			leaf := "├── "
			if j == len(vr.Status.ManagedResources)-1 {
				leaf = "└── "
			}
			where := render.Safe(m.Name)
			if m.Namespace != "" {
				where = render.Safe(m.Namespace) + "/" + where
			}
			fmt.Fprintf(out, "%s%s%s %s  %s\n", indent, leaf, render.Safe(m.Kind), where, render.Safe(m.Health))
		}
	}
	for _, a := range s.Status.Artifacts {
		if a.Problem != "" && a.VidraResource == "" {
			fmt.Fprintf(out, "    (artifact %s not applied: %s)\n", render.Safe(a.ID), render.Safe(problems[a.ID]))
		}
	}
	return nil
}

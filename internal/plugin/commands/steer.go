// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/vidra-operator/vidra/internal/plugin/render"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	applyv1alpha1 "github.com/vidra-operator/vidra/pkg/generated/applyconfiguration/infrahub/v1alpha1"
)

func newReconcile(r *root) *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
		output  string
	)
	cmd := &cobra.Command{
		Use:   "reconcile NAME",
		Short: "Ask the operator to reconcile a VidraResource now, and wait for the outcome",
		Long: `Ask the operator to reconcile a VidraResource now: set its annotation
` + v1alpha1.RequestedAtAnnotation + ` to the current time and, with --wait
(the default), watch the resource until status.lastHandledReconcileAt echoes
that time, then print the outcome: the Ready condition, the objects, and what
failed. The exit code is 0 when the resource is Ready, 1 otherwise.`,
		Example: `  kubectl vidra reconcile sample-app -n vidra-system

  # Only ask; do not wait
  kubectl vidra reconcile sample-app -n vidra-system --wait=false`,
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
			if vr.Spec.Suspend {
				return fmt.Errorf("vidraresource %s/%s is suspended, so the operator would not reconcile it: resume it first (kubectl vidra resume %s -n %s)", vr.Namespace, vr.Name, vr.Name, vr.Namespace)
			}
			value := time.Now().UTC().Format(time.RFC3339Nano)
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.RequestedAtAnnotation: value}}})
			if err != nil {
				return err
			}
			vr, err = c.vidra.InfrahubV1alpha1().VidraResources(vr.Namespace).Patch(ctx, vr.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
			if err != nil {
				return fmt.Errorf("request a reconcile of vidraresource %s/%s: %w", c.namespace, args[0], err)
			}
			if !wait {
				fmt.Fprintf(r.streams.Out, "vidraresource.%s/%s reconcile requested at %s\n", v1alpha1.GroupName, render.Safe(vr.Name), value)
				return nil
			}
			fmt.Fprintf(r.streams.ErrOut, "vidraresource.%s/%s reconcile requested at %s; waiting for the operator\n", v1alpha1.GroupName, render.Safe(vr.Name), value)
			done, err := waitHandled(ctx, c, vr, value, timeout)
			if err != nil {
				return err
			}
			if output != "" {
				if err := printObject(r.streams.Out, done, output); err != nil {
					return err
				}
			} else if err := writeOutcome(r, done); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(done.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
				return exit(1, nil)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", true, "Wait until the operator has handled the request, and print the outcome.")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "How long to wait for the operator.")
	addOutput(cmd, &output, "", "json", "yaml")
	return cmd
}

// waitHandled watches vr from the version the request wrote until its
// status echoes value, and returns the resource as it is then.
//
// A list or watch the caller may not make (403) ends the wait at once, with
// the API server's refusal: the reflector behind the wait retries every error,
// and a person allowed to patch the resource but not to watch it would
// otherwise wait the whole timeout and be told the operator is not running.
// Any other error is retried, and the last one is named if the wait times
// out.
func waitHandled(ctx context.Context, c *clients, vr *v1alpha1.VidraResource, value string, timeout time.Duration) (*v1alpha1.VidraResource, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx, refuse := context.WithCancelCause(ctx)
	defer refuse(nil)
	client := c.vidra.InfrahubV1alpha1().VidraResources(vr.Namespace)
	selector := fields.OneTermEqualSelector("metadata.name", vr.Name).String()
	var (
		mu      sync.Mutex
		lastErr error
	)
	note := func(verb string, err error) error {
		if err == nil || ctx.Err() != nil {
			return err
		}
		err = fmt.Errorf("%s vidraresource %s/%s: %w", verb, vr.Namespace, vr.Name, err)
		mu.Lock()
		lastErr = err
		mu.Unlock()
		// Only a refusal: a 401 may be an expired token that the client's
		// credential plugin renews for the next try.
		if apierrors.IsForbidden(err) {
			refuse(err)
		}
		return err
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			list, err := client.List(ctx, opts)
			return list, note("list", err)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			w, err := client.Watch(ctx, opts)
			return w, note("watch", err)
		},
	}
	var last *v1alpha1.VidraResource
	// As generated informers do: a client that cannot stream a list's
	// items as watch events (a fake) is listed instead.
	_, err := watchtools.UntilWithSync(ctx, cache.ToListWatcherWithWatchListSemantics(lw, c.vidra), &v1alpha1.VidraResource{}, nil, func(ev watch.Event) (bool, error) {
		got, ok := ev.Object.(*v1alpha1.VidraResource)
		if !ok {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			return false, fmt.Errorf("vidraresource %s/%s was deleted while waiting", vr.Namespace, vr.Name)
		}
		last = got
		if got.Spec.Suspend {
			return false, fmt.Errorf("vidraresource %s/%s was suspended while waiting", vr.Namespace, vr.Name)
		}
		return got.Status.LastHandledReconcileAt == value, nil
	})
	if cause := context.Cause(ctx); apierrors.IsForbidden(cause) {
		return nil, cause
	}
	// The wait's own errors name neither the deadline nor the resource (it
	// ends with wait's "timed out waiting for the condition"): the
	// context says why it ended.
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		seen := "never"
		if last != nil && last.Status.LastHandledReconcileAt != "" {
			seen = "last at " + last.Status.LastHandledReconcileAt
		}
		msg := fmt.Sprintf("the operator did not handle the request within %s (it handled one %s): is it running, and does it watch namespace %s?", timeout, seen, vr.Namespace)
		mu.Lock()
		defer mu.Unlock()
		if lastErr != nil {
			return nil, fmt.Errorf("%s (while waiting: %w)", msg, lastErr)
		}
		return nil, errors.New(msg)
	}
	if err != nil {
		return nil, err
	}
	return last, nil
}

// writeOutcome prints what the reconcile found: the Ready condition, the
// objects and their health, and what failed. The messages are the API
// servers' and the names those of objects tenants write: they go through
// render's Safe or OneLine, as in why.
func writeOutcome(r *root, vr *v1alpha1.VidraResource) error {
	var b strings.Builder
	ready := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil {
		fmt.Fprintf(&b, "Ready: Unknown\n")
	} else {
		fmt.Fprintf(&b, "Ready: %s (%s) %s\n", render.Safe(string(ready.Status)), render.Safe(ready.Reason), render.OneLine(ready.Message))
	}
	current := 0
	for _, m := range vr.Status.ManagedResources {
		if m.Health == "Current" {
			current++
		}
	}
	fmt.Fprintf(&b, "Objects: %d managed, %d healthy\n", len(vr.Status.ManagedResources), current)
	x := render.Explain(vr, nil, time.Now())
	if len(x.Failing) > 0 {
		b.WriteString("Objects failing or not healthy:\n")
		for _, f := range x.Failing {
			fmt.Fprintf(&b, "  %s: %s\n", render.Safe(f.Object), render.OneLine(f.Problem))
		}
	}
	if len(x.Problems) > 0 && (ready == nil || ready.Status != metav1.ConditionTrue) {
		b.WriteString("Errors:\n")
		for _, p := range x.Problems {
			fmt.Fprintf(&b, "  %s\n", render.OneLine(p))
		}
	}
	if ready == nil || ready.Status != metav1.ConditionTrue {
		fmt.Fprintf(&b, "See kubectl vidra why %s -n %s\n", render.Safe(vr.Name), render.Safe(vr.Namespace))
	}
	_, err := fmt.Fprint(r.streams.Out, b.String())
	return err
}

// newSuspend builds suspend (suspend true) or resume (false).
func newSuspend(r *root, suspend bool) *cobra.Command {
	use, short, example, done := "suspend", "Stop reconciling a VidraResource and watching its objects", "  kubectl vidra suspend sample-app -n vidra-system", "suspended"
	if !suspend {
		use, short, example, done = "resume", "Resume reconciling a suspended VidraResource", "  kubectl vidra resume sample-app -n vidra-system", "resumed"
	}
	var output string
	cmd := &cobra.Command{
		Use:   use + " NAME",
		Short: short,
		Long: short + `: set spec.suspend to ` + fmt.Sprint(suspend) + ` with a server-side apply of
field manager ` + fieldManager + ` (forced: the command is the request to own
that field). A suspended resource shows STATUS Stale; drift is not corrected
until it is resumed.`,
		Example:           example,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "", "json", "yaml", "name"); err != nil {
				return err
			}
			c, err := r.clients()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			// Read first: an apply of a resource that does not exist would
			// try to create it, and fail on the missing manifest.
			vr, err := c.get(ctx, args[0])
			if err != nil {
				return err
			}
			was := vr.Spec.Suspend
			ac := applyv1alpha1.VidraResource(vr.Name, vr.Namespace).WithSpec(applyv1alpha1.VidraResourceSpec().WithSuspend(suspend))
			vr, err = c.vidra.InfrahubV1alpha1().VidraResources(vr.Namespace).Apply(ctx, ac, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
			if err != nil {
				return fmt.Errorf("set spec.suspend of vidraresource %s/%s: %w", c.namespace, args[0], err)
			}
			if output != "" {
				return printObject(r.streams.Out, vr, output)
			}
			note := ""
			if was == suspend {
				note = " (it was already)"
			}
			fmt.Fprintf(r.streams.Out, "vidraresource.%s/%s %s%s\n", v1alpha1.GroupName, render.Safe(vr.Name), done, note)
			return nil
		},
	}
	addOutput(cmd, &output, "", "json", "yaml", "name")
	return cmd
}

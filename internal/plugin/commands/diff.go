// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/manifest"
	"github.com/vidra-operator/vidra/internal/manifestfrom"
	"github.com/vidra-operator/vidra/internal/plugin/pack"
	"github.com/vidra-operator/vidra/internal/plugin/preview"
	"github.com/vidra-operator/vidra/internal/plugin/render"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// Exit codes of diff, as kubectl diff's.
const (
	diffNone    = 0
	diffChanges = 1
	diffError   = 2
)

func newDiff(r *root) *cobra.Command {
	var (
		files  []string
		output string
	)
	cmd := &cobra.Command{
		Use:   "diff [NAME] [-f FILE|DIR]",
		Short: "Show what applying a VidraResource would change, by server-side dry run",
		Long: `Show what applying a VidraResource would change on its destination: for each
object, the unified diff of the fields that would change, the objects that
would be created, and those that would be pruned, released, kept, held
back or handed over (they are in status.managedResources and no longer in
the manifest). The operator's own engine decides what it would do with
each object; the API server computes each write: the operator's
server-side apply (field manager vidra, forced) runs as a dry run, as the
resource's ServiceAccount when it names one, and the live object is
compared with the answer, without managedFields, resourceVersion,
generation, timestamps and status.

  kubectl vidra diff NAME                 the resource's own manifest against the cluster
  kubectl vidra diff NAME -f FILE|DIR     a new manifest for it (files packed as create does)
  kubectl vidra diff -f vidraresource.yaml   a VidraResource definition, new or changed

The exit code is that of kubectl diff: 0 without differences, 1 with
differences (or objects Vidra would not take over), 2 on an error, such as a
manifest that does not parse. Only the local cluster can be previewed yet.`,
		Example: `  # Has anything drifted from the manifest?
  kubectl vidra diff sample-app -n vidra-system

  # What would a new manifest change?
  kubectl vidra diff sample-app -n vidra-system -f app/

  # What would applying this definition change?
  kubectl vidra diff -f sample-app.yaml`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: r.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, "", "json", "yaml"); err != nil {
				return exit(diffError, err)
			}
			if len(args) == 0 && len(files) == 0 {
				return exit(diffError, errors.New("name a VidraResource, or give its definition with -f"))
			}
			code, err := r.diff(cmd, args, files, output)
			if err != nil {
				return exit(diffError, err)
			}
			if code != diffNone {
				return exit(code, nil)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "With NAME: files or directories of the new manifest. Without: a file holding the VidraResource.")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	addOutput(cmd, &output, "", "json", "yaml")
	return cmd
}

// diff previews the apply and returns the exit code.
func (r *root) diff(cmd *cobra.Command, args, files []string, output string) (int, error) {
	ctx := cmd.Context()
	c, err := r.clients()
	if err != nil {
		return 0, err
	}
	var (
		vr     *v1alpha1.VidraResource
		source string // where the manifest's lines are counted
		objs   []manifest.Object
	)
	if len(args) == 1 {
		if vr, err = c.get(ctx, args[0]); err != nil {
			return 0, err
		}
		source = fmt.Sprintf("spec.manifest of vidraresource %s/%s", vr.Namespace, vr.Name)
		if len(files) > 0 {
			in, err := pack.Read(files, r.streams.In)
			if err != nil {
				return 0, err
			}
			m, err := pack.Pack(in)
			if err != nil {
				return 0, fmt.Errorf("the new manifest does not parse:\n%w", err)
			}
			vr.Spec.Manifest, objs, source = m.Text, m.Objects, ""
			// The files are the whole new manifest, as create packs them.
			vr.Spec.ManifestFrom, vr.Spec.ManifestEncoding = nil, ""
			// A new spec is a new generation, which the engine has not
			// applied yet: what differs is a change, not drift.
			vr.Generation = vr.Status.ObservedGeneration + 1
		}
	} else {
		if vr, err = r.readDefinition(files, c.namespace); err != nil {
			return 0, err
		}
		source = fmt.Sprintf("spec.manifest of %s", strings.Join(files, ","))
		live, err := c.vidra.InfrahubV1alpha1().VidraResources(vr.Namespace).Get(ctx, vr.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			// A new resource: nothing is its yet, nothing to prune.
		case err != nil:
			return 0, fmt.Errorf("get vidraresource %s/%s: %w", vr.Namespace, vr.Name, err)
		default:
			vr.UID, vr.Status = live.UID, live.Status
		}
	}
	if !destination.IsLocalServer(vr.Spec.Destination.Server) {
		return 0, fmt.Errorf("vidraresource %s/%s goes to the remote destination %s: diff supports only the local cluster yet",
			vr.Namespace, vr.Name, vr.Spec.Destination.Server)
	}
	cfg := c.config
	if sa := vr.Spec.ServiceAccountName; sa != "" {
		if cfg, err = asServiceAccount(ctx, c, vr.Namespace, sa); err != nil {
			return 0, err
		}
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	if objs == nil {
		// Read as the operator reads it: spec.manifestFrom with the
		// resource's identity, within the same bounds.
		text, err := fullManifest(ctx, dyn, vr)
		if err != nil {
			return 0, err
		}
		if len(vr.Spec.ManifestFrom) > 0 {
			source += " and its spec.manifestFrom, joined"
		}
		var errs manifest.ErrorList
		if objs, errs = manifest.Parse(text); len(errs) > 0 {
			return 0, fmt.Errorf("the manifest does not parse:\n%s", located(source, errs))
		}
	}
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Reason == v1alpha1.ReasonServiceAccountRequired {
		fmt.Fprintf(r.streams.ErrOut, "warning: the operator applies nothing for vidraresource %s/%s: %s\n",
			render.Safe(vr.Namespace), render.Safe(vr.Name), render.OneLine(c.Message))
	}

	m, dc, err := mapper(cfg)
	if err != nil {
		return 0, err
	}
	res, err := preview.Plan(ctx, preview.Cluster{Client: dyn, Mapper: m, Discovery: dc, Vidra: c.vidra}, vr, objs)
	if err != nil {
		var errs manifest.ErrorList
		if errors.As(err, &errs) {
			return 0, fmt.Errorf("the manifest does not resolve against the cluster:\n%s", located(source, errs))
		}
		return 0, err
	}
	if output != "" {
		err = printData(r.streams.Out, res, output)
	} else {
		err = preview.Render(r.streams.Out, res, r.color())
	}
	switch {
	case err != nil:
		return 0, err
	case res.Failed():
		return 0, errors.New("the API server refused the dry run of some objects (see above)")
	case res.Differs():
		return diffChanges, nil
	}
	return diffNone, nil
}

// located writes the manifest's errors one a line, each with its
// document index and line, prefixed with where those count from.
func located(source string, errs manifest.ErrorList) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("  ")
		if source != "" {
			b.WriteString(source + ": ")
		}
		b.WriteString(e.Error())
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// readDefinition reads one VidraResource from files, strictly: a field
// the API does not have is an error, not silently dropped.
func (r *root) readDefinition(files []string, namespace string) (*v1alpha1.VidraResource, error) {
	in, err := pack.Read(files, r.streams.In)
	if err != nil {
		return nil, err
	}
	if len(in) != 1 {
		return nil, fmt.Errorf("-f without NAME takes one file holding a VidraResource, not %d files", len(in))
	}
	vr := &v1alpha1.VidraResource{}
	if err := yaml.UnmarshalStrict(in[0].Data, vr); err != nil {
		return nil, fmt.Errorf("%s: not a VidraResource: %w", in[0].Path, err)
	}
	if gvk := vr.GroupVersionKind(); gvk != v1alpha1.SchemeGroupVersion.WithKind("VidraResource") {
		return nil, fmt.Errorf("%s: holds %s %s, not a VidraResource of %s (one document only)", in[0].Path, gvk.Kind, gvk.GroupVersion(), v1alpha1.SchemeGroupVersion)
	}
	if vr.Name == "" {
		return nil, fmt.Errorf("%s: the VidraResource has no metadata.name", in[0].Path)
	}
	if vr.Namespace == "" {
		vr.Namespace = namespace
	}
	return vr, nil
}

// fullManifest returns vr's manifest as the operator reads it:
// spec.manifest decoded, then the documents of spec.manifestFrom, read
// with client (the resource's identity), within the operator's bounds.
func fullManifest(ctx context.Context, client dynamic.Interface, vr *v1alpha1.VidraResource) (string, error) {
	if vr.Spec.ManifestEncoding == "" && len(vr.Spec.ManifestFrom) == 0 {
		return vr.Spec.Manifest, nil
	}
	head, derr := manifestfrom.DecodeManifest(vr.Spec.Manifest, vr.Spec.ManifestEncoding, manifest.MaxManifestBytes)
	if derr != nil {
		return "", derr
	}
	refs, rerr := manifestfrom.Refs(vr.Spec.ManifestFrom)
	if rerr != nil {
		return "", rerr
	}
	sources, errs := manifestfrom.Fetch(ctx, client, vr.Namespace, refs, manifest.MaxManifestBytes)
	if len(errs) > 0 {
		all := make([]error, len(errs))
		for i, e := range errs {
			all[i] = e
		}
		return "", errors.Join(all...)
	}
	text, aerr := manifestfrom.Assemble(head, sources, manifest.MaxManifestBytes)
	if aerr != nil {
		return "", aerr
	}
	return text, nil
}

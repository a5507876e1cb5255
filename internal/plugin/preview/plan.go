// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package preview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/manifest"
	"github.com/vidra-operator/vidra/internal/plugin/render"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// Mapper maps kinds to resources; Reset drops what it learned, for a kind
// created since (restmapper.DeferredDiscoveryRESTMapper is one).
type Mapper interface {
	meta.RESTMapper
	meta.ResettableRESTMapper
}

// Cluster is the destination as the operator would act on it.
type Cluster struct {
	// Client acts as the operator would for the resource: impersonating
	// its spec.serviceAccountName, if any.
	Client dynamic.Interface
	Mapper Mapper
	// Discovery, when set, is read for what a manifest naming a kind the
	// cluster does not serve likely meant, as the operator says it.
	Discovery discovery.DiscoveryInterface
}

// key identifies an object across versions of its API group, as the
// operator's inventory does.
type key struct{ group, kind, namespace, name string }

func keyOf(u *unstructured.Unstructured) key {
	gvk := u.GroupVersionKind()
	return key{manifest.StoredGroup(gvk.Group, gvk.Kind), gvk.Kind, u.GetNamespace(), u.GetName()}
}

// Plan previews the apply of objs, the parsed manifest of vr (vr's
// spec.manifest, or a new one for it), against c. vr is the resource as
// it is in the cluster, for its UID (the owner-uid mark) and its inventory;
// a resource not created yet has neither. It returns the manifest's
// errors, as the operator would report them, when the manifest does not
// resolve (a cluster-scoped object with a namespace, a duplicate, a kind
// the destination does not serve).
func Plan(ctx context.Context, c Cluster, vr *v1alpha1.VidraResource, objs []manifest.Object) (*Result, error) {
	resolved, errs := manifest.Resolve(objs, vr.DefaultNamespace(), scopeOf(c))
	if len(errs) > 0 {
		return nil, errs
	}
	res := &Result{Resource: vr.Namespace + "/" + vr.Name}
	desired := map[key]bool{}
	namespaces := map[string]bool{}
	for _, o := range resolved {
		if o.Object.GetAPIVersion() == "v1" && o.Object.GetKind() == "Namespace" {
			namespaces[o.Object.GetName()] = true
		}
	}
	for _, o := range resolved {
		desired[keyOf(o.Object)] = true
		res.Objects = append(res.Objects, planObject(ctx, c, vr, o.Object, namespaces))
	}
	for _, m := range vr.Status.ManagedResources {
		gv, err := schema.ParseGroupVersion(m.APIVersion)
		if err != nil {
			continue
		}
		if desired[key{manifest.StoredGroup(gv.Group, m.Kind), m.Kind, m.Namespace, m.Name}] {
			continue
		}
		if o, ok := planPrune(ctx, c, vr, m, gv.WithKind(m.Kind)); ok {
			res.Objects = append(res.Objects, o)
		}
	}
	holdPrunes(res, len(resolved), vr.Spec.AdoptOrphans)
	return res, nil
}

// holdPrunes turns the prunes and releases of res into ActionHeld where
// the operator would hold them back: a failing object of the manifest (a
// conflict or a refusal) holds the prunes of its own kind and name, in any
// namespace or group (apply.Confusable: it may be that object, moved), and
// nothing else. n is the number of manifest objects at the head of
// res.Objects; with spec.adoptOrphans, a conflict over another resource's
// object may be an adoption the preview cannot confirm, which the message
// says.
func holdPrunes(res *Result, n int, adoptOrphans bool) {
	for i, o := range res.Objects[n:] {
		if o.Action != ActionPrune && o.Action != ActionRelease {
			continue
		}
		for _, f := range res.Objects[:n] {
			if f.Action != ActionConflict && f.Action != ActionError || !apply.Confusable(o.Kind, o.Name, f.Kind, f.Name) {
				continue
			}
			msg := fmt.Sprintf("left the manifest; it would be %s, but an object of the same kind and name fails (%s), which may be this one moved: it stays as it is until that object applies",
				map[Action]string{ActionPrune: "deleted", ActionRelease: "released"}[o.Action], f.Ref())
			if adoptOrphans && f.Action == ActionConflict && strings.HasPrefix(f.Message, markedAsAnother) {
				msg += fmt.Sprintf(" (%s does once adopted, if its owner no longer exists)", f.Ref())
			}
			res.Objects[n+i].Action, res.Objects[n+i].Diff, res.Objects[n+i].Message = ActionHeld, "", msg
			break
		}
	}
}

func scopeOf(c Cluster) manifest.ScopeFunc {
	return func(gvk schema.GroupVersionKind) (bool, error) {
		mp, err := mapping(c.Mapper, gvk)
		if meta.IsNoMatchError(err) && c.Discovery != nil {
			err = destination.SuggestKind(c.Discovery, gvk, err)
		}
		if err != nil {
			return false, err
		}
		return mp.Scope.Name() == meta.RESTScopeNameNamespace, nil
	}
}

// mapping maps gvk, looking again once if the mapper does not know it: a
// CRD may have been created since it learned the kinds.
func mapping(m Mapper, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	mp, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		m.Reset()
		mp, err = m.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return mp, err
}

func objectOf(u *unstructured.Unstructured, a Action) Object {
	return Object{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Action: a}
}

// planObject previews one object of the manifest.
func planObject(ctx context.Context, c Cluster, vr *v1alpha1.VidraResource, obj *unstructured.Unstructured, namespaces map[string]bool) Object {
	want, err := apply.Desired(vr, obj, nil)
	if err != nil {
		o := objectOf(obj, ActionError)
		o.Message = err.Error()
		return o
	}
	if want == nil {
		o := objectOf(obj, ActionIgnore)
		o.Message = "not applied: " + v1alpha1.ApplyPolicyAnnotation + ": " + obj.GetAnnotations()[v1alpha1.ApplyPolicyAnnotation]
		return o
	}
	out := objectOf(want, ActionError)
	gvk := want.GroupVersionKind()
	mp, err := mapping(c.Mapper, gvk)
	if meta.IsNoMatchError(err) {
		// Resolve let it through: a CRD of the manifest defines the kind,
		// which the API server cannot dry-run before the CRD exists.
		return created(out, want, "not checked by the API server: its CustomResourceDefinition is created by this manifest first")
	}
	if err != nil {
		out.Message = err.Error()
		return out
	}
	client := c.Client.Resource(mp.Resource).Namespace(want.GetNamespace())
	live, err := client.Get(ctx, want.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		out.Message = fmt.Sprintf("read %s: %v", out.Ref(), err)
		if hint := apply.ForbiddenHint(err, want.GetNamespace() == ""); hint != "" {
			out.Message += ": " + hint
		}
		return out
	}
	if live != nil {
		if msg, ok := notOurs(vr, live); ok {
			out.Action, out.Message = ActionConflict, msg
			return out
		}
		if obj.GetAnnotations()[v1alpha1.ApplyPolicyAnnotation] == "IfNotPresent" {
			out.Action, out.Message = ActionUnchanged, "exists; "+v1alpha1.ApplyPolicyAnnotation+": IfNotPresent never changes it"
			return out
		}
		// Fields spec.ignore hands to others keep their live values.
		if want, err = apply.Desired(vr, obj, live); err != nil {
			out.Message = err.Error()
			return out
		}
	}
	body, err := json.Marshal(want.Object)
	if err != nil {
		out.Message = fmt.Sprintf("encode %s: %v", out.Ref(), err)
		return out
	}
	// Force as the operator forces its applies to objects it manages: it
	// takes back fields that others changed.
	force := true
	after, err := client.Patch(ctx, want.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
		DryRun: []string{metav1.DryRunAll}, FieldManager: v1alpha1.FieldManager, Force: &force,
	})
	if err != nil {
		if live == nil && apierrors.IsNotFound(err) && namespaces[want.GetNamespace()] {
			// Its namespace is created by the manifest first; a dry run
			// cannot create in a namespace that does not exist yet.
			return created(out, want, "not checked by the API server: namespace "+want.GetNamespace()+" is created by this manifest first")
		}
		msg := apiMessage(err)
		if e, ok := apply.SchemaRefusal(want, 0, err); ok {
			msg = e.Error()
		} else if hint := apply.ForbiddenHint(err, want.GetNamespace() == ""); hint != "" {
			msg += ": " + hint
		}
		out.Message = fmt.Sprintf("the API server refuses the apply of %s: %s", out.Ref(), msg)
		return out
	}
	before, err := YAML(live)
	if err != nil {
		out.Message = err.Error()
		return out
	}
	next, err := YAML(after)
	if err != nil {
		out.Message = err.Error()
		return out
	}
	out.Diff, err = UnifiedDiff(before, next, label("live", out), label("vidra", out))
	if err != nil {
		out.Message = err.Error()
		return out
	}
	switch {
	case live == nil:
		out.Action = ActionCreate
	case out.Diff == "":
		out.Action = ActionUnchanged
	default:
		out.Action = ActionChange
	}
	return out
}

// created previews the creation of want from the client side, when the
// API server cannot be asked yet.
func created(out Object, want *unstructured.Unstructured, why string) Object {
	out.Action, out.Message = ActionCreate, why
	next, err := YAML(want)
	if err == nil {
		out.Diff, err = UnifiedDiff("", next, label("live", out), label("vidra", out))
	}
	if err != nil {
		out.Action, out.Message = ActionError, err.Error()
	}
	return out
}

// label names one side of a diff, as kubectl diff names its directories.
// The names are the objects', which the API server does not always check
// (those of RBAC objects may hold control characters): the label is Safe.
func label(side string, o Object) string {
	ns := o.Namespace
	if ns == "" {
		ns = "-"
	}
	return render.Safe(fmt.Sprintf("%s/%s.%s.%s.%s", side, o.APIVersion, o.Kind, ns, o.Name))
}

// markedAsAnother starts notOurs' message for an object marked as
// another resource's, which holdPrunes tells apart.
const markedAsAnother = "carries the marks of VidraResource "

// notOurs tells why the operator would not write live: it is not marked as
// vr's (another resource's, or nobody's). The operator checks the
// owner-uid label, which only this resource's UID matches.
func notOurs(vr *v1alpha1.VidraResource, live *unstructured.Unstructured) (string, bool) {
	uid := live.GetLabels()[v1alpha1.OwnerUIDLabel]
	if vr.UID != "" && uid == string(vr.UID) {
		if apply.AppliedByVidra(live.GetManagedFields()) {
			return "", false
		}
		// The UID is no secret: marks copied onto an object someone else
		// made do not make it this resource's.
		return fmt.Sprintf("carries this resource's marks but was never applied by Vidra (%s): delete it, or remove it from the manifest", v1alpha1.ReasonUnmanagedExists), true
	}
	if owner := live.GetAnnotations()[v1alpha1.OwnedByAnnotation]; owner != "" && uid != "" {
		// Anyone who may write the object writes its annotation.
		// Whether that resource still exists decides between handover and
		// adoption; the preview does not look it up, and says both.
		adopt := "it is adopted only with spec.adoptOrphans"
		if vr.Spec.AdoptOrphans {
			adopt = "spec.adoptOrphans adopts it if Vidra's apply wrote it and it is on the cluster Vidra runs in"
		}
		return fmt.Sprintf(markedAsAnother+"%s: while that resource exists, Vidra does not write it (%s) and it is handed over when that resource lets it go; if it no longer exists (%s), %s",
			render.Safe(owner), v1alpha1.ReasonOwnedByOther, v1alpha1.ReasonUnmanagedExists, adopt), true
	}
	return fmt.Sprintf("exists without Vidra's marks; Vidra does not take it over (%s): delete it, or remove it from the manifest", v1alpha1.ReasonUnmanagedExists), true
}

// planPrune previews an object of the inventory that left the manifest, by
// the operator's rules: nothing without spec.prune, no Namespace or CRD
// without spec.pruneNamespacesAndCRDs, only objects marked as vr's, and a
// release instead of a deletion for an object whose prune annotation says
// disabled. ok is false when there is nothing to do (the object is gone).
func planPrune(ctx context.Context, c Cluster, vr *v1alpha1.VidraResource, m v1alpha1.ManagedResource, gvk schema.GroupVersionKind) (Object, bool) {
	out := Object{APIVersion: m.APIVersion, Kind: m.Kind, Namespace: m.Namespace, Name: m.Name, Action: ActionError}
	mp, err := mapping(c.Mapper, gvk)
	if meta.IsNoMatchError(err) {
		return out, false
	}
	if err != nil {
		out.Message = err.Error()
		return out, true
	}
	live, err := c.Client.Resource(mp.Resource).Namespace(m.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return out, false
	}
	if err != nil {
		out.Message = fmt.Sprintf("read %s: %v", out.Ref(), err)
		return out, true
	}
	if _, foreign := notOurs(vr, live); foreign {
		// Prune only ever touches objects marked as this resource's.
		return out, false
	}
	before, err := YAML(live)
	if err != nil {
		out.Message = err.Error()
		return out, true
	}
	switch {
	case vr.Spec.Prune != nil && !*vr.Spec.Prune:
		out.Action, out.Message = ActionRelease, "left the manifest; spec.prune is false: kept, without Vidra's marks"
		after := Clean(live)
		unmark(after)
		next, err := YAML(after)
		if err == nil {
			out.Diff, err = UnifiedDiff(before, next, label("live", out), label("vidra", out))
		}
		if err != nil {
			out.Action, out.Message = ActionError, err.Error()
		}
	case live.GetAnnotations()[v1alpha1.PrunePolicyAnnotation] == "disabled":
		out.Action, out.Message = ActionRelease, "left the manifest; "+v1alpha1.PrunePolicyAnnotation+": disabled: kept, without Vidra's marks"
		after := Clean(live)
		unmark(after)
		next, err := YAML(after)
		if err == nil {
			out.Diff, err = UnifiedDiff(before, next, label("live", out), label("vidra", out))
		}
		if err != nil {
			out.Action, out.Message = ActionError, err.Error()
		}
	case isNamespaceOrCRD(gvk) && !vr.Spec.PruneNamespacesAndCRDs:
		out.Action, out.Message = ActionKeep, "left the manifest; prune refuses to delete a Namespace or CRD (and all inside it) unless spec.pruneNamespacesAndCRDs is true"
	default:
		out.Action, out.Message = ActionPrune, "left the manifest"
		out.Diff, err = UnifiedDiff(before, "", label("live", out), label("vidra", out))
		if err != nil {
			out.Action, out.Message = ActionError, err.Error()
		}
	}
	return out, true
}

// unmark strips Vidra's marks, as a release does.
func unmark(u *unstructured.Unstructured) {
	labels := u.GetLabels()
	delete(labels, v1alpha1.ManagedByLabel)
	delete(labels, v1alpha1.OwnerUIDLabel)
	u.SetLabels(labels)
	annotations := u.GetAnnotations()
	delete(annotations, v1alpha1.OwnedByAnnotation)
	u.SetAnnotations(annotations)
}

func isNamespaceOrCRD(gvk schema.GroupVersionKind) bool {
	return (gvk.Group == "" && gvk.Kind == "Namespace") ||
		(gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition")
}

// apiMessage is the API server's own message of err, without the client's
// wrapping.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package preview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/config"
	"github.com/vidra-operator/vidra/internal/destination"
	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
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
	// Vidra reads the VidraResources, as the operator does with its own
	// identity: whose an object's marks name, and who declares an object
	// that leaves the manifest. Nil reads none: such objects are then
	// reported as the operator reports owners it cannot see.
	Vidra versioned.Interface
}

// Plan previews the apply of objs, the parsed manifest of vr (vr's
// spec.manifest, or a new one for it: then vr's generation is above its
// observedGeneration, as the API server would make it), against c. vr is
// the resource as it is in the cluster, for its UID (the owner-uid mark)
// and its inventory; a resource not created yet has neither. The decisions
// are the engine's (apply.Plan); Plan renders them, asking the API server
// for a dry run of each write. It returns the manifest's errors, as the
// operator would report them, when the manifest does not resolve.
func Plan(ctx context.Context, c Cluster, vr *v1alpha1.VidraResource, objs []manifest.Object) (*Result, error) {
	r := &reader{c: c, namespaces: map[string]bool{}, answers: map[string]answer{}}
	for _, o := range objs {
		if o.Object.GetAPIVersion() == "v1" && o.Object.GetKind() == "Namespace" {
			r.namespaces[o.Object.GetName()] = true
		}
	}
	decisions, err := apply.Plan(ctx, apply.PlanInput{VR: vr, Objects: objs, Namespaced: scopeOf(c),
		Overrides: config.DefaultOverrideManagers, Now: time.Now()}, r)
	if err != nil {
		return nil, err
	}
	res := &Result{Resource: vr.Namespace + "/" + vr.Name}
	for _, d := range decisions {
		res.Objects = append(res.Objects, r.render(ctx, d))
	}
	return res, nil
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

// reader is the engine's LiveReader on the API server: GETs, and dry runs
// of the apply, each asked once.
type reader struct {
	c Cluster
	// namespaces are those the manifest creates, in which a dry run cannot
	// create yet.
	namespaces map[string]bool
	answers    map[string]answer
}

// answer is the dry run of one object's apply.
type answer struct {
	after *unstructured.Unstructured
	err   error
}

func ref(u *unstructured.Unstructured) string {
	return Object{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}.Ref()
}

func (r *reader) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	mp, err := mapping(r.c.Mapper, gvk)
	if meta.IsNoMatchError(err) {
		// Resolve let it through: a CRD of the manifest defines the kind.
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	live, err := r.c.Client.Resource(mp.Resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		msg := fmt.Sprintf("read %s: %v", Object{Kind: gvk.Kind, Namespace: namespace, Name: name}.Ref(), err)
		if hint := apply.ForbiddenHint(err, namespace == ""); hint != "" {
			msg += ": " + hint
		}
		return nil, errors.New(msg)
	}
	return live, nil
}

// Resources lists every VidraResource when the person may, else those of
// the namespaces the operator's answer may depend on least: none, and
// says the list is not complete.
func (r *reader) Resources(ctx context.Context) ([]*v1alpha1.VidraResource, bool, error) {
	if r.c.Vidra == nil {
		return nil, false, nil
	}
	list, err := r.c.Vidra.InfrahubV1alpha1().VidraResources(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("list VidraResources: %w", err)
	}
	out := make([]*v1alpha1.VidraResource, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, true, nil
}

func (r *reader) Changes(ctx context.Context, desired, live *unstructured.Unstructured) (bool, error) {
	a := r.dryRun(ctx, desired, live)
	if a.err != nil {
		return false, a.err
	}
	before, err := YAML(live)
	if err != nil {
		return false, err
	}
	after, err := YAML(a.after)
	return before != after, err
}

// dryRun asks the API server for the apply of want over live (nil: a
// creation) as the operator sends it, without writing: forced, as the
// operator forces its applies to objects it manages.
func (r *reader) dryRun(ctx context.Context, want, live *unstructured.Unstructured) answer {
	key := want.GetAPIVersion() + " " + ref(want)
	if a, ok := r.answers[key]; ok {
		return a
	}
	a := r.ask(ctx, want, live)
	r.answers[key] = a
	return a
}

func (r *reader) ask(ctx context.Context, want, live *unstructured.Unstructured) answer {
	mp, err := mapping(r.c.Mapper, want.GroupVersionKind())
	if err != nil {
		return answer{err: err}
	}
	body, err := json.Marshal(want.Object)
	if err != nil {
		return answer{err: fmt.Errorf("encode %s: %w", ref(want), err)}
	}
	force := true
	after, err := r.c.Client.Resource(mp.Resource).Namespace(want.GetNamespace()).Patch(ctx, want.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: v1alpha1.FieldManager, Force: &force})
	if err == nil {
		return answer{after: after}
	}
	if live == nil && apierrors.IsNotFound(err) && r.namespaces[want.GetNamespace()] {
		return answer{err: errNamespaceFirst}
	}
	msg := apiMessage(err)
	if e, ok := apply.SchemaRefusal(want, 0, err); ok {
		msg = e.Error()
	} else if hint := apply.ForbiddenHint(err, want.GetNamespace() == ""); hint != "" {
		msg += ": " + hint
	}
	return answer{err: fmt.Errorf("the API server refuses the apply of %s: %s", ref(want), msg)}
}

// errNamespaceFirst is a dry run's refusal to create in a namespace the
// manifest creates first.
var errNamespaceFirst = errors.New("its namespace is created by this manifest first")

// apiMessage is the API server's own message of err, without the client's
// wrapping.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}

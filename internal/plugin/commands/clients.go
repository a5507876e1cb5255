// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package commands

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/pager"

	"github.com/vidra-operator/vidra/internal/plugin/render"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

// clients are the connections of one command, from kubectl's flags.
type clients struct {
	config *rest.Config
	// namespace is -n, else the kubeconfig context's, else default.
	namespace string
	vidra     versioned.Interface
	kube      kubernetes.Interface
}

func (r *root) clients() (*clients, error) {
	cfg, err := r.flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = fieldManager + "/" + version()
	cfg.WarningHandler = warnings{r.streams.ErrOut}
	ns, _, err := r.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, err
	}
	vc, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{config: cfg, namespace: ns, vidra: vc, kube: kc}, nil
}

// namespace is the namespace of -n or of the kubeconfig context, without
// connecting anywhere.
func (r *root) namespace() (string, error) {
	ns, _, err := r.flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// get reads VidraResource name of the clients' namespace, with an error
// that names it when it does not exist.
func (c *clients) get(ctx context.Context, name string) (*v1alpha1.VidraResource, error) {
	vr, err := c.vidra.InfrahubV1alpha1().VidraResources(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Most often the wrong namespace: say where it looked and how to
		// find the resource.
		return nil, hinted{fmt.Sprintf("no VidraResource %q in namespace %q: `kubectl vidra get -n %s` lists those there, `kubectl vidra get -A` every one",
			name, c.namespace, c.namespace), err}
	}
	if err != nil {
		return nil, fmt.Errorf("get vidraresource %s/%s: %w", c.namespace, name, err)
	}
	return vr, nil
}

// hinted is an error told in words of what to do, which still unwraps to
// the API server's.
type hinted struct {
	msg string
	err error
}

func (h hinted) Error() string { return h.msg }
func (h hinted) Unwrap() error { return h.err }

// mapper is a RESTMapper on discovery held in memory for one command, reset
// on a miss: a CRD created a moment ago is found.
// The discovery it returns is the mapper's cache.
func mapper(cfg *rest.Config) (*restmapper.DeferredDiscoveryRESTMapper, discovery.CachedDiscoveryInterface, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	cached := memory.NewMemCacheClient(dc)
	return restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil
}

// asServiceAccount returns cfg acting as ServiceAccount ns/sa, as the
// operator acts for a resource naming it, after checking that the person
// may impersonate it: without that right every request would fail with a
// message about impersonation, not about the objects.
func asServiceAccount(ctx context.Context, c *clients, ns, sa string) (*rest.Config, error) {
	user := "system:serviceaccount:" + ns + ":" + sa
	review, err := c.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "impersonate", Resource: "serviceaccounts", Namespace: ns, Name: sa,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("check whether you may impersonate %s: %w", user, err)
	}
	if !review.Status.Allowed {
		return nil, fmt.Errorf("the resource acts as %s (spec.serviceAccountName), and you may not impersonate it, so the dry run cannot run as the operator would: "+
			"ask for the impersonate verb on serviceaccounts %q in namespace %s", user, sa, ns)
	}
	cfg := rest.CopyConfig(c.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg, nil
}

// defaultChunkSize is how many VidraResources one list request asks for, as
// kubectl get's --chunk-size: thousands of resources, each with its
// manifests and status, are listed in pages, so that no single response
// has to hold them all, on the API server or here.
const defaultChunkSize = 500

// list calls each with every VidraResource of namespace (all of them for
// metav1.NamespaceAll) that selector selects, chunk at a time (0: in one
// request). A continue token that expired while paging restarts as one
// full list, as kubectl does.
func (c *clients) list(ctx context.Context, namespace, selector string, chunk int64, each func(*v1alpha1.VidraResource) error) error {
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.vidra.InfrahubV1alpha1().VidraResources(namespace).List(ctx, opts)
	})
	p.PageSize = chunk
	err := p.EachListItem(ctx, metav1.ListOptions{LabelSelector: selector}, func(obj runtime.Object) error {
		return each(obj.(*v1alpha1.VidraResource))
	})
	if err != nil {
		return fmt.Errorf("list vidraresources: %w", err)
	}
	return nil
}

// completeNames completes the NAME argument with the VidraResources of the
// namespace the flags name: only one name, then nothing.
func (r *root) completeNames(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, err := r.clients()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	err = c.list(cmd.Context(), c.namespace, "", defaultChunkSize, func(vr *v1alpha1.VidraResource) error {
		names = append(names, render.Safe(vr.Name))
		return nil
	})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	slices.Sort(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}

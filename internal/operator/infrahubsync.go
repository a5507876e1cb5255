// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/vidra-operator/vidra/internal/config"
	"github.com/vidra-operator/vidra/internal/infrahub"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller/infrahubsync"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
)

// DefaultSyncWorkers is the number of InfrahubSync passes run in parallel.
// They have workers of their own: a slow Infrahub holds these, never the
// workers of VidraResources.
const DefaultSyncWorkers = 2

// infrahubSyncServed reports whether the API server serves InfrahubSyncs:
// an operator installed with the VidraResource CRD alone runs without the
// sync controller, rather than never becoming ready.
func infrahubSyncServed(kube kubernetes.Interface) (bool, error) {
	list, err := kube.Discovery().ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", v1alpha1.SchemeGroupVersion, err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == v1alpha1.InfrahubSyncResourcePlural }), nil
}

// newSyncController builds the InfrahubSync controller over the operator's
// informer factory, with a source factory that carries the outbound guards
// of remote destinations: https unless --allow-http-destinations, the CIDR
// deny list checked at dial time, no proxy, bounded answers.
func (o *Operator) newSyncController(ctx context.Context, kube kubernetes.Interface, vidra versioned.Interface, cfg *rest.Config, recorder record.EventRecorder, current func() *config.Config) (*infrahubsync.Controller, error) {
	opts := o.opts
	guard := opts.RemoteGuard
	factory := func(req infrahubsync.SourceRequest) (infrahubsync.ArtifactSource, error) {
		hc, err := infrahub.NewHTTPClient(infrahub.HTTPOptions{Guard: guard, CAPEM: req.CAPEM})
		if err != nil {
			return nil, err
		}
		return infrahub.New(req.URL, infrahub.Options{HTTPClient: hc, AllowHTTP: guard.AllowHTTP, Credentials: req.Credentials,
			// An artifact becomes a VidraResource's manifest: anything
			// longer than the CRD accepts is refused at the download.
			MaxArtifactBytes: v1alpha1.MaxManifestBytes})
	}
	if opts.InfrahubSources != nil {
		factory = opts.InfrahubSources
	}
	var owns func(cache.ObjectName) bool
	if o.member != nil {
		owns = o.member.Owns
	}
	return infrahubsync.NewController(ctx, infrahubsync.Collaborators{
		Vidra:     vidra,
		Syncs:     o.factory.Infrahub().V1alpha1().InfrahubSyncs(),
		Resources: o.factory.Infrahub().V1alpha1().VidraResources(),
		Sources:   factory,
		Secrets:   infrahubsync.NewSecretReader(kube, cfg),
		Webhooks:  o.webhooks,
	}, infrahubsync.Options{
		Namespace:             opts.Namespace,
		TrustedNamespaces:     opts.TrustedNamespaces,
		DefaultServiceAccount: opts.DefaultServiceAccount,
		AllowHTTP:             guard.AllowHTTP,
		Config:                current,
		Recorder:              recorder,
		Registerer:            registererOf(opts.Metrics),
		Owns:                  owns,
		OnPass:                opts.OnSyncPass,
	})
}

func registererOf(r *prometheus.Registry) prometheus.Registerer {
	if r == nil {
		return nil
	}
	return r
}

// runSyncController runs the InfrahubSync controller, when there is one,
// until ctx ends.
func (o *Operator) runSyncController(ctx context.Context) error {
	if o.Syncs == nil {
		return nil
	}
	return o.Syncs.Run(ctx, DefaultSyncWorkers)
}

// logSyncsOff says why the operator runs without the sync controller.
func logSyncsOff(ctx context.Context) {
	klog.FromContext(ctx).Info("InfrahubSyncs are not served by the API server (install manifests/crd/infrahub.operators.com_infrahubsyncs.yaml and restart the operator); running without the InfrahubSync controller")
}

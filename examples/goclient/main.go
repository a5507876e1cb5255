// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Command goclient is the program of docs/go-client.md: it lists, applies
// and watches VidraResources with the generated clientset, informers and
// apply configurations. The doc's snippet is this file's imports and main,
// which TestDocSnippetsAreCompiledCode checks.
package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	infrahubv1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	applyv1alpha1 "github.com/vidra-operator/vidra/pkg/generated/applyconfiguration/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
	"github.com/vidra-operator/vidra/pkg/generated/informers/externalversions"
)

func main() {
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", clientcmd.RecommendedHomeFile)
	if err != nil {
		panic(err)
	}
	vidra := versioned.NewForConfigOrDie(cfg)

	// List.
	list, err := vidra.InfrahubV1alpha1().VidraResources("team-a").List(ctx, metav1.ListOptions{})
	if err != nil {
		panic(err)
	}
	for _, vr := range list.Items {
		fmt.Println(vr.Name, vr.Status.Conditions)
	}

	// Server-side apply: only the fields set are yours.
	vr := applyv1alpha1.VidraResource("web", "team-a").
		WithSpec(applyv1alpha1.VidraResourceSpec().
			WithManifest("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n").
			WithServiceAccountName("vidra-tenant"))
	if _, err := vidra.InfrahubV1alpha1().VidraResources("team-a").Apply(ctx, vr, metav1.ApplyOptions{FieldManager: "my-tool", Force: true}); err != nil {
		panic(err)
	}

	// Watch through an informer and read from its lister.
	factory := externalversions.NewSharedInformerFactoryWithOptions(vidra, 10*time.Minute, externalversions.WithNamespace("team-a"))
	vrs := factory.Infrahub().V1alpha1().VidraResources()
	_, _ = vrs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			vr := obj.(*infrahubv1alpha1.VidraResource)
			fmt.Println("changed:", vr.Name)
		},
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	ready, _ := vrs.Lister().VidraResources("team-a").List(labels.Everything())
	fmt.Println(len(ready), "VidraResources")
}

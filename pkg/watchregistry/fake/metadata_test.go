// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package fake_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
	"github.com/vidra-operator/vidra/pkg/watchregistry/fake"
)

func TestUpdateThroughTheFakeMetadataClientIsDelivered(t *testing.T) {
	md := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	fake.BumpMetadataResourceVersions(md)

	ctx, reg, evs := startRegistry(t, watchregistry.Options[string]{
		MetadataOnly: true,
	}, nil, md)
	ref := watchregistry.Ref{GVR: configMaps, Namespace: "ns"}
	trackListed(ctx, t, reg, evs, ref)

	client := md.Resource(configMaps).Namespace("ns").(metadatafake.MetadataClient)
	created, err := client.CreateFake(&metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "settings"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ev := evs.next(t, "the add"); ev.Type != watchregistry.EventAdded || ev.Object.GetResourceVersion() != created.ResourceVersion || created.ResourceVersion == "" {
		t.Fatalf("event %s at %q, want Added at %q (not empty)", ev.Type, ev.Object.GetResourceVersion(), created.ResourceVersion)
	}
	labelled := created.DeepCopy()
	labelled.Labels = map[string]string{"tier": "web"}
	updated, err := client.UpdateFake(labelled, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ev := evs.next(t, "the update")
	if ev.Type != watchregistry.EventUpdated || ev.Object.GetResourceVersion() != updated.ResourceVersion || ev.Object.GetLabels()["tier"] != "web" {
		t.Fatalf("event %s at %s with labels %v, want Updated at %s with tier=web", ev.Type, ev.Object.GetResourceVersion(), ev.Object.GetLabels(), updated.ResourceVersion)
	}
	if n := reg.Stats().Filtered[watchregistry.FilterResync]; n != 0 {
		t.Fatalf("%d updates filtered as resyncs", n)
	}
}

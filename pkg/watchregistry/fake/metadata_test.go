// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package fake_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
	"github.com/vidra-operator/vidra/pkg/watchregistry/fake"
)

func TestUpdateThroughTheFakeMetadataClientIsDelivered(t *testing.T) {
	md := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	fake.BumpMetadataResourceVersions(md)

	evs := events{ch: make(chan watchregistry.Event, 16)}
	reg, err := watchregistry.New(watchregistry.Options[string]{
		MetadataOnly: true,
		Map:          func(watchregistry.Event) []string { return []string{"owner"} },
		Enqueue:      func(_ string, ev watchregistry.Event) { evs.ch <- ev },
	})
	if err != nil {
		t.Fatal(err)
	}
	reg.SetCluster("", nil, md)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); <-reg.Done() }()
	if err := reg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ref := watchregistry.Ref{GVR: configMaps, Namespace: "ns"}
	if err := reg.Track("owner", []watchregistry.Ref{ref}); err != nil {
		t.Fatal(err)
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, 10*time.Second)
	defer waitCancel()
	if err := reg.WaitForSync(waitCtx, ref); err != nil {
		t.Fatal(err)
	}
	if ev := evs.next(t, "the initial list"); ev.Type != watchregistry.EventInitialList {
		t.Fatalf("first event %s, want InitialList", ev.Type)
	}

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

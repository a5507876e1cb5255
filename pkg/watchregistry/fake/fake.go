// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package fake helps unit-test code built on watchregistry with client-go's
// fake dynamic and metadata clients, without an API server.
//
// The fake client's object tracker stores objects without ever setting their
// metadata.resourceVersion, so an informer sees every update at the same
// (empty) version, and the registry filters it as a resync: nothing is
// delivered. BumpResourceVersions makes the fake client behave like an API
// server in that respect:
//
//	dyn := dynamicfake.NewSimpleDynamicClient(scheme)
//	fake.BumpResourceVersions(dyn)
//	reg.SetCluster("", dyn, nil)
//
// BumpMetadataResourceVersions does the same for the fake metadata client,
// for a registry with Options.MetadataOnly.
package fake

import (
	"strconv"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
)

// BumpResourceVersions makes every create, update and patch through c store
// the object with a new resourceVersion, increasing across the client, and
// return it with that version, as an API server does. Objects given to the
// client's constructor or added to its tracker directly keep theirs, and
// server-side apply is left as the fake client does it. Call it before the
// client is used.
func BumpResourceVersions(c *dynamicfake.FakeDynamicClient) {
	bump(c, c.Tracker())
}

// BumpMetadataResourceVersions does for client-go's fake metadata client
// what BumpResourceVersions does for the dynamic one, for a registry with
// Options.MetadataOnly: write through the resource client's CreateFake and
// UpdateFake (metadatafake.MetadataClient), and each write gets a new
// resourceVersion, with no version to set by hand.
//
//	md := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
//	fake.BumpMetadataResourceVersions(md)
//	cms := md.Resource(gvr).Namespace("default").(metadatafake.MetadataClient)
//	cms.CreateFake(&metav1.PartialObjectMetadata{...}, metav1.CreateOptions{})
func BumpMetadataResourceVersions(c *metadatafake.FakeMetadataClient) {
	bump(c, c.Tracker())
}

// bump prepends the bumping reaction to the client's chain, so that it
// handles every verb before the client's own reaction on the same tracker;
// watches are a separate chain and still see every change.
func bump(c interface {
	PrependReactor(verb, resource string, reaction clienttesting.ReactionFunc)
}, tracker clienttesting.ObjectTracker) {
	c.PrependReactor("*", "*", clienttesting.ObjectReaction(&bumpingTracker{ObjectTracker: tracker}))
}

type bumpingTracker struct {
	clienttesting.ObjectTracker
	rv atomic.Uint64
}

func (t *bumpingTracker) bump(obj runtime.Object) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	m.SetResourceVersion(strconv.FormatUint(t.rv.Add(1), 10))
	return nil
}

func (t *bumpingTracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	if err := t.bump(obj); err != nil {
		return err
	}
	return t.ObjectTracker.Create(gvr, obj, ns, opts...)
}

func (t *bumpingTracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	if err := t.bump(obj); err != nil {
		return err
	}
	return t.ObjectTracker.Update(gvr, obj, ns, opts...)
}

func (t *bumpingTracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	if err := t.bump(obj); err != nil {
		return err
	}
	return t.ObjectTracker.Patch(gvr, obj, ns, opts...)
}

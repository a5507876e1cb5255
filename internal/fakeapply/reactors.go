// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package fakeapply

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
)

// AnswerApplies has the fakes answer server-side applies as the API server
// does, at resourceVersion rv: a change, sent through the metadata client,
// with the applied object's metadata; a creation, sent through the dynamic
// client, which asks for the whole object, with the applied object. Other
// patches go on to the trackers.
func AnswerApplies(dyn *dynamicfake.FakeDynamicClient, meta *metadatafake.FakeMetadataClient, rv string) {
	meta.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		if p.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		return true, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Namespace: p.GetNamespace(), Name: p.GetName(), ResourceVersion: rv}}, nil
	})
	dyn.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		if p.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(p.GetPatch()); err != nil {
			return true, nil, err
		}
		u.SetResourceVersion(rv)
		return true, u, nil
	})
}

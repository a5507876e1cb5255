// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned/fake"
)

// parseVR returns the parse of vr's manifest, which vr carries, through the
// cache pc.
func parseVR(t *testing.T, pc *parseCache, key cache.ObjectName, vr *v1alpha1.VidraResource) ([]manifest.Object, manifest.ErrorList) {
	t.Helper()
	objs, errs, err := unpack((&manifestSource{parsed: pc}).objects(t.Context(), key, vr))
	if err != nil {
		t.Fatal(err)
	}
	return objs, errs
}

func sourceVR(text string) *v1alpha1.VidraResource {
	return &v1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app", UID: "uid-1", Generation: 1},
		Spec:       v1alpha1.VidraResourceSpec{Manifest: text},
	}
}

// cachedCopy is vr as the informer holds it.
func cachedCopy(vr *v1alpha1.VidraResource) *v1alpha1.VidraResource {
	c := vr.DeepCopy()
	StripManifest(c)
	return c
}

const sourceManifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"

func TestStripManifestKeepsOnlyItsLengthAndSum(t *testing.T) {
	vr := sourceVR(sourceManifest + "# " + strings.Repeat("x", 1000) + "\n")
	c := cachedCopy(vr)
	if c.Spec.Manifest != "" {
		t.Fatalf("the cached copy holds %d bytes of manifest", len(c.Spec.Manifest))
	}
	size, sum, ok := strippedManifest(c)
	if !ok || size != len(vr.Spec.Manifest) {
		t.Fatalf("strippedManifest() = %d, %v; want %d, true", size, ok, len(vr.Spec.Manifest))
	}
	again := c.DeepCopy()
	StripManifest(again)
	if _, sum2, ok := strippedManifest(again); !ok || sum2 != sum {
		t.Error("a second transform of the cached copy lost what the first recorded")
	}
	if _, _, ok := strippedManifest(vr); ok {
		t.Error("a resource that carries its manifest counts as stripped")
	}
	if vr.Annotations[cachedManifestAnnotation] != "" {
		t.Error("stripping a copy changed the original")
	}
}

// gets counts the GETs of VidraResources the source sent.
func gets(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == v1alpha1.ResourcePlural {
			n++
		}
	}
	return n
}

func TestManifestSourceReadsTheResourceOnlyWhenItsParseIsNotCached(t *testing.T) {
	live := sourceVR(sourceManifest)
	cs := fake.NewClientset(live)
	s := &manifestSource{parsed: newParseCache(), vidra: cs}
	key := cache.MetaObjectToName(live)
	cached := cachedCopy(live)

	step := func(what string, vr *v1alpha1.VidraResource, wantGets int) []manifest.Object {
		t.Helper()
		before := gets(cs)
		objs, errs, err := unpack(s.objects(t.Context(), key, vr))
		if err != nil || len(errs) > 0 {
			t.Fatalf("%s: objects() = %v, %v", what, errs, err)
		}
		if got := gets(cs) - before; got != wantGets {
			t.Errorf("%s: %d GETs, want %d", what, got, wantGets)
		}
		return objs
	}
	first := step("first reconcile", cached, 1)
	if len(first) != 1 || first[0].Object.GetName() != "a" {
		t.Fatalf("first reconcile parsed %v", first)
	}
	step("drift repair a moment later", cached, 0)
	// spec.interval changed: a new generation, the same manifest.
	other := cached.DeepCopy()
	other.Generation = 2
	step("a new generation of the same manifest", other, 0)
	s.parsed.forget(key)
	step("a re-check after the parse was evicted", cached, 1)
	step("the re-check after that", cached, 0)
}

// A resource read again may be newer than the informer's copy: its
// manifest is the one to apply (level-triggered), and it is what the cache
// holds next.
func TestManifestSourceTakesTheManifestOfANewerGeneration(t *testing.T) {
	old := sourceVR(sourceManifest)
	live := sourceVR(strings.Replace(sourceManifest, "name: a", "name: b", 1))
	live.Generation = 2
	cs := fake.NewClientset(live)
	s := &manifestSource{parsed: newParseCache(), vidra: cs}
	key := cache.MetaObjectToName(old)
	objs, errs, err := unpack(s.objects(t.Context(), key, cachedCopy(old)))
	if err != nil || len(errs) > 0 || len(objs) != 1 || objs[0].Object.GetName() != "b" {
		t.Fatalf("objects() = %v, %v, %v; want the newer manifest's object b", objs, errs, err)
	}
	before := gets(cs)
	if _, _, err := unpack(s.objects(t.Context(), key, cachedCopy(live))); err != nil || gets(cs) != before {
		t.Errorf("the informer's copy of the newer generation read it again (%v)", err)
	}
}

func TestManifestSourceRefusesAResourceCreatedAgain(t *testing.T) {
	old := sourceVR(sourceManifest)
	live := sourceVR(sourceManifest)
	live.UID = "uid-2"
	s := &manifestSource{parsed: newParseCache(), vidra: fake.NewClientset(live)}
	_, _, err := unpack(s.objects(t.Context(), cache.MetaObjectToName(old), cachedCopy(old)))
	if err == nil || !strings.Contains(err.Error(), "uid-1") {
		t.Fatalf("objects() = %v, want an error naming the UID that is gone", err)
	}
}

// A manifest over the bound, stored before the CRD had its rule, is
// refused from the informer's copy alone, without a read; one that is
// carried whole too.
func TestManifestOverTheBoundIsRefusedWithoutARead(t *testing.T) {
	big := sourceVR(sourceManifest + "#" + strings.Repeat("x", v1alpha1.MaxManifestBytes) + "\n")
	cs := fake.NewClientset(big)
	s := &manifestSource{parsed: newParseCache(), vidra: cs}
	for name, vr := range map[string]*v1alpha1.VidraResource{"cached copy": cachedCopy(big), "whole": big} {
		objs, errs, err := unpack(s.objects(t.Context(), cache.MetaObjectToName(big), vr))
		if err != nil || len(objs) > 0 || len(errs) != 1 || errs[0].Reason != manifest.ReasonManifestTooLarge ||
			!strings.Contains(errs[0].Error(), v1alpha1.ManifestTooLargeMessage) {
			t.Errorf("%s: objects() = %v, %v, %v; want one ManifestTooLarge error with the CRD's message", name, objs, errs, err)
		}
	}
	if n := gets(cs); n != 0 {
		t.Errorf("%d GETs, want none", n)
	}
	at := sourceVR(sourceManifest + "#" + strings.Repeat("x", v1alpha1.MaxManifestBytes-len(sourceManifest)-2) + "\n")
	if _, errs := parseVR(t, newParseCache(), cache.MetaObjectToName(at), at); len(errs) > 0 {
		t.Errorf("a manifest of exactly %d bytes: %v", len(at.Spec.Manifest), errs)
	}
}

// The CRD's rule on spec.manifest and the operator's check must agree, in
// number and in words.
func TestCRDBoundsTheManifestAsTheOperatorDoes(t *testing.T) {
	data, err := os.ReadFile("../../manifests/crd/infrahub.operators.com_vidraresources.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]struct {
							Properties map[string]struct {
								Validations []struct{ Rule, Message string } `json:"x-kubernetes-validations"`
							} `json:"properties"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	got := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["manifest"].Validations
	want := []struct{ Rule, Message string }{{fmt.Sprintf("size(bytes(self)) <= %d", v1alpha1.MaxManifestBytes), v1alpha1.ManifestTooLargeMessage}}
	if len(got) != 1 || got[0] != want[0] {
		t.Errorf("the CRD's rules on spec.manifest are %+v, want %+v", got, want)
	}
}

// unpack is a read as the tests look at it: a failure as one error.
func unpack(r read) ([]manifest.Object, manifest.ErrorList, error) { return r.objs, r.errs, r.err() }

// sourceStore is a fake API server holding one ConfigMap, counting reads.
type sourceStore struct {
	client *dynamicfake.FakeDynamicClient
}

func newSourceStore(data string) *sourceStore {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "bundle"}, Data: map[string]string{"app.yaml": data}}
	return &sourceStore{client: dynamicfake.NewSimpleDynamicClient(scheme, cm)}
}

func (s *sourceStore) set(t *testing.T, data string) {
	t.Helper()
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": "team-a", "name": "bundle"}, "data": map[string]any{"app.yaml": data}}}
	if _, err := s.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("team-a").Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The parse of a resource with spec.manifestFrom is cached under the sums
// of its sources: the same content parses once, a changed one again.
func TestManifestFromParseIsCachedUnderTheSourcesSums(t *testing.T) {
	store := newSourceStore(sourceManifest)
	s := &manifestSource{parsed: newParseCache(), home: func(context.Context, *v1alpha1.VidraResource) (dynamic.Interface, error) {
		return store.client, nil
	}}
	vr := sourceVR("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inline\n")
	vr.Spec.ManifestFrom = []v1alpha1.ManifestSource{{ConfigMapRef: &v1alpha1.SourceKeyReference{Name: "bundle"}}}
	key := cache.MetaObjectToName(vr)

	first := s.objects(t.Context(), key, vr)
	if err := first.err(); err != nil || len(first.errs) > 0 || len(first.objs) != 2 || len(first.applied) != 1 {
		t.Fatalf("objects() = %d objects, %v, %v, applied %v; want inline and a", len(first.objs), first.errs, err, first.applied)
	}
	again := s.objects(t.Context(), key, vr)
	if &again.objs[0] != &first.objs[0] {
		t.Error("the same sources were parsed again, not taken from the cache")
	}

	store.set(t, strings.ReplaceAll(sourceManifest, "name: a", "name: b"))
	changed := s.objects(t.Context(), key, vr)
	if err := changed.err(); err != nil || len(changed.objs) != 2 || changed.objs[1].Object.GetName() != "b" {
		t.Fatalf("after the ConfigMap changed: %d objects, %v", len(changed.objs), err)
	}
	if changed.applied[0].SHA256 == first.applied[0].SHA256 {
		t.Error("the applied sum did not change with the content")
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahubsync

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vidra-operator/vidra/internal/infrahub"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

func testSync(uid types.UID) *v1alpha1.InfrahubSync {
	return &v1alpha1.InfrahubSync{
		ObjectMeta: metav1.ObjectMeta{Name: "devices", Namespace: "team", UID: uid},
		Spec: v1alpha1.InfrahubSyncSpec{
			Source:      v1alpha1.InfrahubSource{InfrahubAPIURL: "https://infrahub.example.com", ArtefactName: "config"},
			Destination: v1alpha1.Destination{Namespace: "apps"},
			Template:    v1alpha1.VidraResourceTemplate{ServiceAccountName: "deployer"},
		},
	}
}

func art(id, sum string) infrahub.Artifact {
	return infrahub.Artifact{ID: id, Name: "config", Checksum: sum, StorageID: "s-" + sum}
}

// child is the child sync would write for a, as the API server stores it.
func child(sync *v1alpha1.InfrahubSync, a infrahub.Artifact) *v1alpha1.VidraResource {
	vr := Desired(sync, a, "kind: ConfigMap")
	vr.UID = types.UID("vr-" + a.ID)
	return vr
}

type planSummary struct {
	Fetch, Refresh, Delete, Skipped, Current []string
}

func summarize(p Plan) planSummary {
	var s planSummary
	for _, a := range p.Fetch {
		s.Fetch = append(s.Fetch, a.ID)
	}
	for _, r := range p.Refresh {
		s.Refresh = append(s.Refresh, r.Artifact.ID)
	}
	for _, c := range p.Delete {
		s.Delete = append(s.Delete, c.Name)
	}
	for _, k := range p.Skipped {
		s.Skipped = append(s.Skipped, k.Artifact.ID+":"+k.Reason)
	}
	for _, a := range p.Current {
		s.Current = append(s.Current, a.ID)
	}
	return s
}

func TestDecide(t *testing.T) {
	sync := testSync("sync-uid")
	other := testSync("other-uid")
	other.Name = "other"
	a1, a2 := art("a1", "11111111111111111111111111111111"), art("a2", "22222222222222222222222222222222")
	a1changed := art("a1", "33333333333333333333333333333333")
	handMade := child(sync, a2)
	handMade.OwnerReferences = nil
	stale := child(sync, a1)
	stale.Spec.Destination.Namespace = "elsewhere"
	relabelled := child(sync, a1)
	relabelled.Labels[v1alpha1.SyncNameLabel] = "someone-else"
	pending := a2
	pending.Status = infrahub.StatusPending
	yamlCT, textCT := a1, a2
	yamlCT.ContentType, textCT.ContentType = "application/yaml; charset=utf-8", "text/plain"
	badID := art("Not_A_Name", "44444444444444444444444444444444")
	tooLarge := v1alpha1.SyncedArtifact{ID: "a1", Checksum: a1changed.Checksum, StorageID: a1changed.StorageID, Problem: ContentProblemPrefix + " is larger than 1048576 bytes"}

	tests := []struct {
		name     string
		listed   []infrahub.Artifact
		children []*v1alpha1.VidraResource
		intact   map[string]bool
		previous []v1alpha1.SyncedArtifact
		want     planSummary
	}{
		{name: "new artifacts are downloaded, in id order", listed: []infrahub.Artifact{a2, a1},
			want: planSummary{Fetch: []string{"a1", "a2"}}},
		{name: "an unchanged poll does nothing", listed: []infrahub.Artifact{a1, a2}, children: []*v1alpha1.VidraResource{child(sync, a1), child(sync, a2)},
			want: planSummary{Current: []string{"a1", "a2"}}},
		{name: "a changed checksum downloads that artifact only", listed: []infrahub.Artifact{a1changed, a2}, children: []*v1alpha1.VidraResource{child(sync, a1), child(sync, a2)},
			want: planSummary{Fetch: []string{"a1"}, Current: []string{"a2"}}},
		{name: "without a checksum the storage id decides", listed: []infrahub.Artifact{{ID: "a1", StorageID: "s-1"}}, children: []*v1alpha1.VidraResource{child(sync, infrahub.Artifact{ID: "a1", StorageID: "s-1"})},
			want: planSummary{Current: []string{"a1"}}},
		{name: "neither checksum nor storage id: always downloaded", listed: []infrahub.Artifact{{ID: "a1"}}, children: []*v1alpha1.VidraResource{child(sync, infrahub.Artifact{ID: "a1"})},
			want: planSummary{Fetch: []string{"a1"}}},
		{name: "an artifact that left the answer has its child deleted", listed: []infrahub.Artifact{a2}, children: []*v1alpha1.VidraResource{child(sync, a1), child(sync, a2)},
			want: planSummary{Delete: []string{"a1"}, Current: []string{"a2"}}},
		{name: "an empty answer deletes every child of the sync", listed: nil, children: []*v1alpha1.VidraResource{child(sync, a1)},
			want: planSummary{Delete: []string{"a1"}}},
		{name: "another sync's children are never deleted, even labelled with this sync's name", children: []*v1alpha1.VidraResource{child(other, a1), func() *v1alpha1.VidraResource {
			vr := child(other, a2)
			vr.Labels[v1alpha1.SyncNameLabel] = sync.Name
			return vr
		}()},
			want: planSummary{}},
		{name: "a hand-made VidraResource named like an artifact is left alone and reported", listed: []infrahub.Artifact{a2}, children: []*v1alpha1.VidraResource{handMade},
			want: planSummary{Skipped: []string{"a2:" + v1alpha1.ReasonNameTaken}}},
		{name: "another sync's child named like an artifact is left alone", listed: []infrahub.Artifact{a1}, children: []*v1alpha1.VidraResource{child(other, a1)},
			want: planSummary{Skipped: []string{"a1:" + v1alpha1.ReasonNameTaken}}},
		{name: "a child whose template fields drifted is refreshed without a download", listed: []infrahub.Artifact{a1}, children: []*v1alpha1.VidraResource{stale},
			want: planSummary{Refresh: []string{"a1"}}},
		{name: "a child whose name label changed is refreshed", listed: []infrahub.Artifact{a1}, children: []*v1alpha1.VidraResource{relabelled},
			want: planSummary{Refresh: []string{"a1"}}},
		{name: "a hand-edited manifest is downloaded again", listed: []infrahub.Artifact{a1}, children: []*v1alpha1.VidraResource{child(sync, a1)}, intact: map[string]bool{"a1": false},
			want: planSummary{Fetch: []string{"a1"}}},
		{name: "an artifact not Ready is reported, its child kept", listed: []infrahub.Artifact{a1, pending}, children: []*v1alpha1.VidraResource{child(sync, a1), child(sync, a2)},
			want: planSummary{Skipped: []string{"a2:" + v1alpha1.ReasonArtifactsNotApplied}, Current: []string{"a1"}}},
		{name: "a listed content type that is not YAML or JSON is reported, not downloaded", listed: []infrahub.Artifact{yamlCT, textCT},
			want: planSummary{Fetch: []string{"a1"}, Skipped: []string{"a2:" + v1alpha1.ReasonArtifactsNotApplied}}},
		{name: "an id that cannot be a name is reported", listed: []infrahub.Artifact{badID},
			want: planSummary{Skipped: []string{"Not_A_Name:" + v1alpha1.ReasonArtifactsNotApplied}}},
		{name: "content refused before is not downloaded again", listed: []infrahub.Artifact{a1changed}, children: []*v1alpha1.VidraResource{child(sync, a1)}, previous: []v1alpha1.SyncedArtifact{tooLarge},
			want: planSummary{Skipped: []string{"a1:" + v1alpha1.ReasonArtifactsNotApplied}}},
		{name: "new content after a refusal is downloaded", listed: []infrahub.Artifact{art("a1", "55555555555555555555555555555555")}, previous: []v1alpha1.SyncedArtifact{tooLarge},
			want: planSummary{Fetch: []string{"a1"}}},
		{name: "a duplicate id in one answer is one artifact", listed: []infrahub.Artifact{a1, a1},
			want: planSummary{Fetch: []string{"a1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Sync: sync, Listed: tt.listed, Children: map[string]*v1alpha1.VidraResource{}, Intact: tt.intact, Previous: map[string]v1alpha1.SyncedArtifact{}}
			for _, c := range tt.children {
				in.Children[c.Name] = c
			}
			for _, p := range tt.previous {
				in.Previous[p.ID] = p
			}
			if diff := cmp.Diff(tt.want, summarize(Decide(in))); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDesiredChildIsOwnedAndNamedAfterTheArtifact(t *testing.T) {
	sync := testSync("sync-uid")
	sync.Spec.Template.Labels = map[string]string{"team": "net"}
	vr := Desired(sync, art("a1", "11111111111111111111111111111111"), "kind: ConfigMap")
	if vr.Name != "a1" || vr.Namespace != "team" {
		t.Errorf("child is %s/%s, want team/a1", vr.Namespace, vr.Name)
	}
	ref := metav1.GetControllerOf(vr)
	if ref == nil || ref.UID != "sync-uid" || ref.Kind != "InfrahubSync" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("controller reference = %+v, want the sync, blocking its deletion", ref)
	}
	if vr.Labels[v1alpha1.SyncNameLabel] != "devices" || vr.Labels["team"] != "net" {
		t.Errorf("labels = %v", vr.Labels)
	}
	if vr.Spec.ServiceAccountName != "deployer" || vr.Spec.Destination.Namespace != "apps" || vr.Spec.Manifest != "kind: ConfigMap" {
		t.Errorf("spec = %+v", vr.Spec)
	}
}

func TestUsableContentType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/yaml": true, "application/json": true, "text/yaml; charset=utf-8": true, "application/x-yaml": true,
		"text/plain": false, "application/xml": false, "": false, "image/svg+xml": false, strings.Repeat("a", 100): false,
	} {
		if got := UsableContentType(ct); got != want {
			t.Errorf("UsableContentType(%q) = %v, want %v", ct, got, want)
		}
	}
}

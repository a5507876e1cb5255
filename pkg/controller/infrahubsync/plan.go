// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahubsync

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"mime"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vidra-operator/vidra/internal/infrahub"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// Input is what a pass knows when it decides: the sync, the artifacts
// Infrahub listed, and the VidraResources of the sync's namespace that carry
// its name label or an artifact's name.
type Input struct {
	Sync *v1alpha1.InfrahubSync
	// Listed are the artifacts Infrahub listed, as it listed them.
	Listed []infrahub.Artifact
	// Children are the VidraResources of the sync's namespace named after a
	// listed artifact or labelled with the sync's name, by name.
	Children map[string]*v1alpha1.VidraResource
	// Previous is what the sync's status says of each artifact, by id:
	// content refused before is not downloaded again until Infrahub lists
	// other content.
	Previous map[string]v1alpha1.SyncedArtifact
	// Intact tells, by child name, whether a child's manifest is still the
	// content its checksum annotation names; a child absent from it is
	// taken as intact.
	Intact map[string]bool
}

// Plan is what a pass does, decided before anything is done.
type Plan struct {
	// Fetch are the artifacts whose content must be downloaded and written
	// to their child (created, or updated), in id order.
	Fetch []infrahub.Artifact
	// Refresh are the children whose content is current but whose other
	// fields (template, destination, marks) are not: rewritten from their
	// own manifest, without a download.
	Refresh []Refresh
	// Delete are the sync's own children whose artifact left the listing.
	Delete []*v1alpha1.VidraResource
	// Skipped are the artifacts not applied, with why.
	Skipped []Skip
	// Current are the artifacts whose child is as it should be.
	Current []infrahub.Artifact
}

// Refresh is a child to rewrite around its current manifest.
type Refresh struct {
	Artifact infrahub.Artifact
	Child    *v1alpha1.VidraResource
}

// Skip is an artifact not applied, and why, in Vidra's words.
type Skip struct {
	Artifact infrahub.Artifact
	Problem  string
	// Reason is the condition reason it contributes.
	Reason string
	// Kept is true when the sync's child for the artifact exists and is
	// kept as it is.
	Kept bool
}

// Empty reports whether the plan writes nothing.
func (p Plan) Empty() bool { return len(p.Fetch) == 0 && len(p.Refresh) == 0 && len(p.Delete) == 0 }

// Decide computes the plan of a pass. It writes nothing and asks nobody.
func Decide(in Input) Plan {
	var p Plan
	listed := map[string]bool{}
	for _, a := range sortedArtifacts(in.Listed) {
		if listed[a.ID] {
			// Infrahub lists one artifact per (definition, target,
			// branch); a duplicate id in one answer is the same artifact.
			continue
		}
		listed[a.ID] = true
		if msg := badArtifact(a); msg != "" {
			p.Skipped = append(p.Skipped, Skip{Artifact: a, Problem: msg, Reason: v1alpha1.ReasonArtifactsNotApplied})
			continue
		}
		child := in.Children[a.ID]
		if child != nil && !Owns(in.Sync, child) {
			p.Skipped = append(p.Skipped, Skip{Artifact: a, Reason: v1alpha1.ReasonNameTaken,
				Problem: fmt.Sprintf("a VidraResource named %s exists and is not this sync's; it is left alone", a.ID)})
			continue
		}
		if !a.Ready() {
			// What was applied stays: a render in progress or failed in
			// Infrahub is no reason to remove what runs.
			p.Skipped = append(p.Skipped, Skip{Artifact: a, Reason: v1alpha1.ReasonArtifactsNotApplied, Kept: child != nil,
				Problem: fmt.Sprintf("the artifact's status in Infrahub is %s, not Ready; not applied", sanitize(a.Status, 32))})
			continue
		}
		if child == nil || !contentCurrent(a, child, in.Intact) {
			if prev, ok := in.Previous[a.ID]; ok && refusedBefore(prev, a) {
				p.Skipped = append(p.Skipped, Skip{Artifact: a, Reason: v1alpha1.ReasonArtifactsNotApplied, Kept: child != nil, Problem: prev.Problem})
				continue
			}
			p.Fetch = append(p.Fetch, a)
			continue
		}
		if !childCurrent(in.Sync, a, child) {
			p.Refresh = append(p.Refresh, Refresh{Artifact: a, Child: child})
			continue
		}
		p.Current = append(p.Current, a)
	}
	for _, name := range slices.Sorted(maps.Keys(in.Children)) {
		child := in.Children[name]
		if !listed[name] && Owns(in.Sync, child) && child.DeletionTimestamp == nil {
			p.Delete = append(p.Delete, child)
		}
	}
	return p
}

func sortedArtifacts(as []infrahub.Artifact) []infrahub.Artifact {
	as = slices.Clone(as)
	slices.SortStableFunc(as, func(a, b infrahub.Artifact) int { return strings.Compare(a.ID, b.ID) })
	return as
}

// badArtifact says why an artifact cannot become a VidraResource at all,
// or "" when it can. The id becomes the child's name; every other field
// ends up in status, so each is bounded.
func badArtifact(a infrahub.Artifact) string {
	switch {
	case len(a.ID) > 64 || len(validation.IsDNS1123Subdomain(a.ID)) > 0:
		return fmt.Sprintf("the artifact's id %q is not usable as a VidraResource name (lowercase letters, digits, '-', at most 64 bytes)", sanitize(a.ID, 64))
	case len(a.Checksum) > 128, len(a.StorageID) > 128, len(a.Name) > 253, len(a.Target) > 253:
		return "Infrahub listed the artifact with a checksum, storage id, name or target longer than Vidra keeps; not applied"
	case a.ContentType != "" && !UsableContentType(a.ContentType):
		return unusableContentType(a.ContentType)
	}
	return ""
}

// ContentProblemPrefix starts the problem of content Vidra refused (too
// large, not YAML or JSON, not UTF-8): the same content is not downloaded
// again.
const ContentProblemPrefix = "the artifact's content"

// refusedBefore reports whether prev says the content Infrahub lists for a
// was downloaded and refused already.
func refusedBefore(prev v1alpha1.SyncedArtifact, a infrahub.Artifact) bool {
	return strings.HasPrefix(prev.Problem, ContentProblemPrefix) && (a.Checksum != "" || a.StorageID != "") &&
		prev.Checksum == a.Checksum && prev.StorageID == a.StorageID
}

// UsableContentType reports whether content of this type can be a
// VidraResource's manifest: YAML or JSON.
func UsableContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch mt {
	case "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "application/json":
		return true
	}
	return false
}

func unusableContentType(ct string) string {
	return fmt.Sprintf(ContentProblemPrefix+" type is %q; Vidra applies application/yaml or application/json only: set the artifact definition's content_type", sanitize(ct, 64))
}

// contentCurrent reports whether child holds the content Infrahub lists
// for a: the same checksum (or, without one, the same storage id), and a
// manifest nobody changed since.
func contentCurrent(a infrahub.Artifact, child *v1alpha1.VidraResource, intact map[string]bool) bool {
	ann := child.Annotations
	if a.Checksum != "" {
		if ann[v1alpha1.ArtifactChecksumAnnotation] != a.Checksum {
			return false
		}
	} else if a.StorageID == "" || ann[v1alpha1.ArtifactStorageIDAnnotation] != a.StorageID {
		// Neither listed: nothing tells the content unchanged.
		return false
	}
	if ok, known := intact[child.Name]; known && !ok {
		return false
	}
	return true
}

// childCurrent reports whether everything of child but its manifest is as
// the sync says.
func childCurrent(sync *v1alpha1.InfrahubSync, a infrahub.Artifact, child *v1alpha1.VidraResource) bool {
	want := Desired(sync, a, child.Spec.Manifest)
	if !equality.Semantic.DeepEqual(want.Spec, child.Spec) {
		return false
	}
	for k, v := range want.Labels {
		if child.Labels[k] != v {
			return false
		}
	}
	for k, v := range want.Annotations {
		if child.Annotations[k] != v {
			return false
		}
	}
	return controllerRef(child) != nil
}

// Owns reports whether child is sync's: its controller ownerReference
// names the sync's UID. A name label alone proves nothing: anyone who may
// create a VidraResource may write labels.
func Owns(sync *v1alpha1.InfrahubSync, child *v1alpha1.VidraResource) bool {
	ref := controllerRef(child)
	return ref != nil && ref.UID == sync.UID && ref.Kind == "InfrahubSync"
}

func controllerRef(child *v1alpha1.VidraResource) *metav1.OwnerReference {
	return metav1.GetControllerOfNoCopy(child)
}

// Desired is the child of sync for artifact a holding manifest: its
// metadata (name, labels, annotations, owner) and spec.
func Desired(sync *v1alpha1.InfrahubSync, a infrahub.Artifact, manifest string) *v1alpha1.VidraResource {
	t := sync.Spec.Template
	labels := maps.Clone(t.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.SyncNameLabel] = sync.Name
	ann := map[string]string{v1alpha1.ArtifactChecksumAnnotation: a.Checksum}
	if a.StorageID != "" {
		ann[v1alpha1.ArtifactStorageIDAnnotation] = a.StorageID
	}
	if a.Name != "" {
		ann[v1alpha1.ArtifactNameAnnotation] = a.Name
	}
	if manifest != "" {
		sum := sha256.Sum256([]byte(manifest))
		ann[v1alpha1.ArtifactContentSHA256Annotation] = hex.EncodeToString(sum[:])
	}
	if a.Checksum == "" {
		delete(ann, v1alpha1.ArtifactChecksumAnnotation)
	}
	vr := &v1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{
			Name: a.ID, Namespace: sync.Namespace, Labels: labels, Annotations: ann,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sync, v1alpha1.SchemeGroupVersion.WithKind("InfrahubSync"))},
		},
		Spec: v1alpha1.VidraResourceSpec{
			Manifest:           manifest,
			Destination:        *sync.Spec.Destination.DeepCopy(),
			Interval:           t.Interval.DeepCopy(),
			ServiceAccountName: t.ServiceAccountName,
			Prune:              t.Prune,
			DeletionPolicy:     t.DeletionPolicy,
			DriftPolicy:        t.DriftPolicy,
			Ignore:             slices.Clone(t.Ignore),
			Wait:               t.Wait,
			Timeout:            t.Timeout.DeepCopy(),
		},
	}
	// The API server defaults these; the comparison must see them as it
	// stores them.
	if vr.Spec.Prune == nil {
		yes := true
		vr.Spec.Prune = &yes
	} else {
		p := *vr.Spec.Prune
		vr.Spec.Prune = &p
	}
	if vr.Spec.DeletionPolicy == "" {
		vr.Spec.DeletionPolicy = v1alpha1.DeletionPolicyDelete
	}
	if vr.Spec.Destination.KubeconfigSecretRef != nil && vr.Spec.Destination.KubeconfigSecretRef.Key == "" {
		vr.Spec.Destination.KubeconfigSecretRef.Key = "kubeconfig"
	}
	return vr
}

// sanitize keeps s for a message: printable ASCII only, n bytes at most.
// What Infrahub sends is a foreign server's text.
func sanitize(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= n {
			b.WriteString("...")
			break
		}
		if r < 0x20 || r > 0x7e {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package plugin_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/plugin/preview"
	"github.com/vidra-operator/vidra/internal/shard"
	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// The preview and the operator agree: a manifest change goes through
// kubectl vidra diff, then through the operator, and each object ends as
// the diff said. One resource's change covers most decisions at once (a
// reconcile each, not one per decision); spec.prune false, which is the
// whole resource's, takes a second.
func TestDiffSaysWhatTheOperatorDoes(t *testing.T) {
	ns := namespace(t)
	held := ns + "-held"
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(t.Context(), held, metav1.DeleteOptions{}) })
	namespaceDoc := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + held + "\n"
	web := ready(t, ns, "web", docs(configMap("same", "1"), configMap("changed", "1"), configMap("gone", "1"), configMap("shared", "1"), namespaceDoc),
		func(vr *v1alpha1.VidraResource) { vr.Spec.AdoptOrphans = true })
	// heir declares shared too, and waits for web to let it go.
	testenv.CreateVR(t, vidra, ns, "heir", configMap("shared", "1"))
	testenv.WaitVR(t, vidra, ns, "heir", "found shared owned by web", testenv.HasCondition(v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonOwnedByOther))
	plantOrphan(t, ns, "orphan")
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	next := docs(configMap("same", "1"), configMap("changed", "2"), configMap("new", "1"), configMap("orphan", "1"), configMap("taken", "1"))
	said := agree(t, ns, "web", web, next)
	want := map[string]preview.Action{
		"ConfigMap " + ns + "/same": preview.ActionUnchanged, "ConfigMap " + ns + "/changed": preview.ActionChange,
		"ConfigMap " + ns + "/new": preview.ActionCreate, "ConfigMap " + ns + "/orphan": preview.ActionChange,
		"ConfigMap " + ns + "/taken": preview.ActionConflict, "ConfigMap " + ns + "/gone": preview.ActionPrune,
		"Namespace " + held: preview.ActionKeep, "ConfigMap " + ns + "/shared": preview.ActionHandOver,
	}
	checkSaid(t, said, want)

	t.Run("release", func(t *testing.T) {
		ns := namespace(t)
		vr := ready(t, ns, "web", docs(configMap("a", "1"), configMap("b", "1")), func(vr *v1alpha1.VidraResource) {
			f := false
			vr.Spec.Prune = &f
		})
		checkSaid(t, agree(t, ns, "web", vr, configMap("a", "1")), map[string]preview.Action{
			"ConfigMap " + ns + "/a": preview.ActionUnchanged, "ConfigMap " + ns + "/b": preview.ActionRelease,
		})
	})
}

// checkSaid fails t unless the diff said want, object by object.
func checkSaid(t *testing.T, said []saidObject, want map[string]preview.Action) {
	t.Helper()
	got := map[string]preview.Action{}
	for _, s := range said {
		got[s.Ref()] = s.Action
	}
	for ref, a := range want {
		if got[ref] != a {
			t.Errorf("diff said %s: %q, want %q (all: %v)", ref, got[ref], a, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("diff said %v, want %v", got, want)
	}
}

// saidObject is what the diff said of one object, with the object as it
// was before the operator acted.
type saidObject struct {
	preview.Object
	before *metav1.PartialObjectMetadata
}

// agree runs the diff of manifest for resource ns/name (vr as it is), then
// gives the resource that manifest, waits for the operator to reconcile
// it, and checks, object by object, that the operator did what the diff
// said. It returns what the diff said.
func agree(t *testing.T, ns, name string, vr *v1alpha1.VidraResource, manifest string) []saidObject {
	t.Helper()
	file := filepath.Join(t.TempDir(), "next.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, "diff", name, "-n", ns, "-f", file, "-o", "json")
	var out preview.Result
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatalf("diff -o json: %v\n%s%s", err, res.stdout, res.stderr)
	}
	said := make([]saidObject, len(out.Objects))
	for i, o := range out.Objects {
		said[i] = saidObject{Object: o, before: metadataOf(t, o)}
	}
	testenv.UpdateVR(t, vidra, ns, name, func(vr *v1alpha1.VidraResource) { vr.Spec.Manifest = manifest })
	testenv.WaitVR(t, vidra, ns, name, "reconciled the new manifest", func(got *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		return got.Generation > vr.Generation && c != nil && c.ObservedGeneration == got.Generation && got.Status.ObservedGeneration == got.Generation
	})
	for _, s := range said {
		t.Run(string(s.Action)+" "+s.Ref(), func(t *testing.T) { checkDone(t, vr, s) })
	}
	return said
}

// metadataOf reads the object o names, nil when it does not exist.
func metadataOf(t *testing.T, o preview.Object) *metav1.PartialObjectMetadata {
	t.Helper()
	var (
		obj metav1.Object
		err error
	)
	switch o.Kind {
	case "ConfigMap":
		obj, err = kube.CoreV1().ConfigMaps(o.Namespace).Get(t.Context(), o.Name, metav1.GetOptions{})
	case "Namespace":
		obj, err = kube.CoreV1().Namespaces().Get(t.Context(), o.Name, metav1.GetOptions{})
	default:
		t.Fatalf("the test reads no %s", o.Kind)
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		Labels: obj.GetLabels(), DeletionTimestamp: obj.GetDeletionTimestamp()}}
}

// checkDone fails t unless the object of s is as the action the diff
// said leaves it, vr being the resource that was reconciled.
func checkDone(t *testing.T, vr *v1alpha1.VidraResource, s saidObject) {
	now := metadataOf(t, s.Object)
	owner := func(m *metav1.PartialObjectMetadata) string {
		if m == nil {
			return "(gone)"
		}
		return m.Labels[v1alpha1.OwnerUIDLabel]
	}
	unchanged := now != nil && s.before != nil && now.ResourceVersion == s.before.ResourceVersion
	var ok bool
	switch s.Action {
	case preview.ActionCreate:
		ok = s.before == nil && owner(now) == string(vr.UID)
	case preview.ActionChange:
		ok = now != nil && !unchanged && owner(now) == string(vr.UID)
	case preview.ActionUnchanged, preview.ActionKeep:
		ok = unchanged && owner(now) == string(vr.UID)
	case preview.ActionConflict:
		ok = unchanged && owner(now) != string(vr.UID)
	case preview.ActionPrune:
		ok = now == nil || now.DeletionTimestamp != nil
	case preview.ActionRelease:
		ok = now != nil && now.UID == s.before.UID && owner(now) == ""
	case preview.ActionHandOver:
		ok = now != nil && now.UID == s.before.UID && owner(now) != "" && owner(now) != string(vr.UID)
	default:
		t.Fatalf("the diff said %s (%s), which this test does not check", s.Action, s.Message)
	}
	if !ok {
		t.Errorf("the diff said %s (%s); the operator left it: %s", s.Action, s.Message, describe(s.before, now))
	}
}

func describe(before, now *metav1.PartialObjectMetadata) string {
	show := func(m *metav1.PartialObjectMetadata) string {
		if m == nil {
			return "absent"
		}
		return fmt.Sprintf("resourceVersion %s, owner %q, deleting %v", m.ResourceVersion, m.Labels[v1alpha1.OwnerUIDLabel], m.DeletionTimestamp != nil)
	}
	return "before " + show(before) + ", now " + show(now)
}

// plantOrphan leaves ConfigMap ns/name as a VidraResource that is gone
// would have: its marks, written by Vidra's apply.
func plantOrphan(t *testing.T, ns, name string) {
	t.Helper()
	ghost := cache.ObjectName{Namespace: ns, Name: "ghost"}
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"labels":{%q:%q,%q:"5f0c6a52-0000-4000-8000-000000000000",%q:%q},"annotations":{%q:%q}},"data":{"value":"0"}}`,
		name, v1alpha1.ManagedByLabel, v1alpha1.ManagedByValue, v1alpha1.OwnerUIDLabel, v1alpha1.BucketLabel, shard.BucketLabel(ghost),
		v1alpha1.OwnedByAnnotation, ghost.String())
	force := true
	if _, err := kube.CoreV1().ConfigMaps(ns).Patch(t.Context(), name, types.ApplyPatchType, []byte(body),
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManager, Force: &force}); err != nil {
		t.Fatal(err)
	}
}

// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package security_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/vidra-operator/vidra/internal/operator"
	"github.com/vidra-operator/vidra/internal/shard"
	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller"
	"github.com/vidra-operator/vidra/pkg/watchregistry"
)

// ownershipConfigMap is a ConfigMap of the given data, as YAML.
func ownershipConfigMap(name string, data map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n", name)
	for k, v := range data {
		fmt.Fprintf(&b, "  %s: %q\n", k, v)
	}
	return b.String()
}

// tenant returns a tenant namespace with ServiceAccount "deployer", which
// may edit that namespace.
func tenant(t *testing.T) string {
	t.Helper()
	ns := tenantNamespace(t)
	serviceAccount(t, ns, "deployer", ns)
	return ns
}

func conflictWith(reason string) func(*v1alpha1.VidraResource) bool {
	return hasCondition(v1alpha1.ConditionConflict, metav1.ConditionTrue, reason)
}

func adoptingOrphans(vr *v1alpha1.VidraResource) { vr.Spec.AdoptOrphans = true }

func hasMarks(o metav1.Object) bool {
	return o.GetLabels()[v1alpha1.ManagedByLabel] != "" || o.GetLabels()[v1alpha1.OwnerUIDLabel] != "" ||
		o.GetAnnotations()[v1alpha1.OwnedByAnnotation] != ""
}

// An object made in the place of one Vidra applied, from a copy that kept
// its marks (a backup restored, kubectl get -o yaml edited and created
// again), is not Vidra's: the resource's UID is no secret, and only Vidra's
// own apply makes an object its. The resource reports the copy as an object
// it does not own, and deleting the resource leaves it.
func TestACopyOfAManagedObjectIsNotTakenOrDeleted(t *testing.T) {
	ns := tenant(t)
	createVR(t, ns, "owner", ownershipConfigMap("app", map[string]string{"k": "v"}), asServiceAccount("deployer"))
	waitVR(t, ns, "owner", "became Ready", isReady)
	orig, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	suspend := func(on bool) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"suspend":%t}}`, on)
		if _, err := vidra.InfrahubV1alpha1().VidraResources(ns).Patch(t.Context(), "owner", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	suspend(true)
	waitVR(t, ns, "owner", "suspended", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSuspended))
	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	copied := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: orig.Labels, Annotations: orig.Annotations},
		Data: map[string]string{"someone": "else's"}}
	created, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), copied, metav1.CreateOptions{FieldManager: "restore"})
	if err != nil {
		t.Fatal(err)
	}
	suspend(false)
	waitVR(t, ns, "owner", "reported the copy as an object it does not own", conflictWith(v1alpha1.ReasonUnmanagedExists))

	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeleted(t, ns, "owner")
	now, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "app", metav1.GetOptions{})
	switch {
	case err != nil:
		t.Fatalf("the copy was deleted with the resource: %v", err)
	case now.UID != created.UID || now.Data["someone"] != "else's" || now.Data["k"] != "":
		t.Errorf("the copy was written: %v", now.Data)
	}
}

// A leftover, an object whose marks name a VidraResource that is gone, is
// taken over only by a resource that opts in: whoever may create the object
// can forge both the marks and the vidra Apply entry that make it look like
// one, and a resource that took it silently would keep under its own name
// whatever the forger wrote under other field managers, and delete the
// object with it.
func TestAForgedLeftoverIsAdoptedOnlyByAResourceThatOptsIn(t *testing.T) {
	ns := tenant(t)
	ghost := cache.ObjectName{Namespace: ns, Name: "ghost"}
	forged := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app","labels":{%q:%q,%q:"5f0c6a52-0000-4000-8000-000000000000",%q:%q},"annotations":{%q:%q}},"data":{"planted":"yes"}}`,
		v1alpha1.ManagedByLabel, v1alpha1.ManagedByValue, v1alpha1.OwnerUIDLabel, v1alpha1.BucketLabel, shard.BucketLabel(ghost),
		v1alpha1.OwnedByAnnotation, ghost.String())
	force := true
	planted, err := kube.CoreV1().ConfigMaps(ns).Patch(t.Context(), "app", types.ApplyPatchType, []byte(forged),
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManager, Force: &force})
	if err != nil {
		t.Fatal(err)
	}

	createVR(t, ns, "owner", ownershipConfigMap("app", map[string]string{"k": "v"}), asServiceAccount("deployer"))
	vr := waitVR(t, ns, "owner", "reported the leftover as an object it does not own", conflictWith(v1alpha1.ReasonUnmanagedExists))
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionConflict); !strings.Contains(c.Message, ghost.String()) || !strings.Contains(c.Message, "spec.adoptOrphans") {
		t.Errorf("Conflict message %q, want it to name the gone owner %s and spec.adoptOrphans", c.Message, ghost)
	}
	now, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.ResourceVersion != planted.ResourceVersion {
		t.Errorf("the leftover was written without spec.adoptOrphans: %v %v", now.Labels, now.Data)
	}

	if _, err := vidra.InfrahubV1alpha1().VidraResources(ns).Patch(t.Context(), "owner", types.MergePatchType,
		[]byte(`{"spec":{"adoptOrphans":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	vr = waitVR(t, ns, "owner", "adopted the leftover", isReady)
	now, err = kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.UID != planted.UID || now.Labels[v1alpha1.OwnerUIDLabel] != string(vr.UID) || now.Data["k"] != "v" {
		t.Errorf("after opting in, the object is %v %v, want the leftover marked as owner's and applied", now.Labels, now.Data)
	}
}

// A manifest naming someone else's Deployment, with an extra container, an
// extra label and an extra annotation: a non-forced apply would merge all
// three into the object before anyone noticed.
func TestTenantCannotChangeAnObjectVidraDoesNotOwn(t *testing.T) {
	ns := tenant(t)
	replicas := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns", Labels: map[string]string{"app": "dns"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "dns"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "dns"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "dns", Image: "registry.k8s.io/coredns:v1"}}},
			},
		},
	}
	before, err := kube.AppsV1().Deployments(ns).Create(t.Context(), dep, metav1.CreateOptions{FieldManager: "platform-team"})
	if err != nil {
		t.Fatal(err)
	}
	// Deployments watched already, as in any cluster where Vidra deploys
	// applications: the cache, not the API server, answers that no managed
	// Deployment of that name exists.
	createVR(t, ns, "warm", `apiVersion: apps/v1
kind: Deployment
metadata: {name: warm}
spec:
  selector: {matchLabels: {app: warm}}
  template:
    metadata: {labels: {app: warm}}
    spec: {containers: [{name: app, image: "registry.k8s.io/pause:3.10"}]}
`, asServiceAccount("deployer"))
	waitVR(t, ns, "warm", "became Ready", isReady)
	createVR(t, ns, "grab", `apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  labels: {app: dns, injected: "yes"}
  annotations: {injected: "yes"}
spec:
  selector: {matchLabels: {app: dns}}
  template:
    metadata: {labels: {app: dns}}
    spec:
      containers:
      - {name: dns, image: "registry.k8s.io/coredns:v1"}
      - {name: sidecar, image: "evil.example/steal:latest"}
`, asServiceAccount("deployer"))
	waitVR(t, ns, "grab", "reported the object it does not own", conflictWith(v1alpha1.ReasonUnmanagedExists))

	after, err := kube.AppsV1().Deployments(ns).Get(t.Context(), "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the object was written to: resourceVersion %s, was %s; labels %v, annotations %v, containers %d",
			after.ResourceVersion, before.ResourceVersion, after.Labels, after.Annotations, len(after.Spec.Template.Spec.Containers))
	}
	if hasMarks(after) {
		t.Errorf("the object carries Vidra's marks: labels %v, annotations %v", after.Labels, after.Annotations)
	}
}

// A resource with prune false lets an object go: its marks are stripped by
// Vidra, which then also wrote it. Another tenant's resource declaring the
// same name must not take the object over as if it were Vidra's own.
func TestTenantCannotAdoptAnObjectReleasedByAnotherResource(t *testing.T) {
	ns := tenant(t)
	createVR(t, ns, "first", ownershipConfigMap("settings", map[string]string{"owner": "first"})+"---\n"+ownershipConfigMap("keep", map[string]string{"k": "v"}),
		asServiceAccount("deployer"), func(vr *v1alpha1.VidraResource) { f := false; vr.Spec.Prune = &f })
	waitVR(t, ns, "first", "became Ready", isReady)
	setManifest(t, ns, "first", ownershipConfigMap("keep", map[string]string{"k": "v"}))
	released := waitObject(t, configMaps, ns, "settings", "was released", func(o *unstructured.Unstructured) bool {
		return o != nil && !hasMarks(o)
	})

	// Even a resource that adopts orphans: a released object is nobody's.
	createVR(t, ns, "second", ownershipConfigMap("settings", map[string]string{"owner": "second"}), asServiceAccount("deployer"), adoptingOrphans)
	waitVR(t, ns, "second", "reported the released object", conflictWith(v1alpha1.ReasonUnmanagedExists))
	cur := getObject(t, configMaps, ns, "settings")
	if cur == nil || cur.GetResourceVersion() != released.GetResourceVersion() {
		t.Fatalf("the released object was written to: %v", cur)
	}
}

// Two resources declare one ConfigMap; the second is told that the first
// owns it. Deleting the first must not delete the ConfigMap from under the
// second: it is handed over, with no moment without it.
func TestDeletingOneOfTwoDeclarersHandsTheObjectOver(t *testing.T) {
	ns := tenant(t)
	manifest := ownershipConfigMap("shared", map[string]string{"k": "v"})
	createVR(t, ns, "first", manifest, asServiceAccount("deployer"))
	waitVR(t, ns, "first", "became Ready", isReady)
	second := createVR(t, ns, "second", manifest, asServiceAccount("deployer"))
	waitVR(t, ns, "second", "reported the other owner", conflictWith(v1alpha1.ReasonOwnedByOther))
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	w, err := kube.CoreV1().ConfigMaps(ns).Watch(t.Context(), metav1.ListOptions{
		FieldSelector: "metadata.name=shared", ResourceVersion: cm.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every change of the object until the second resource owns it: none
	// may be a deletion, and the UID stays.
	deadline := time.After(60 * time.Second)
	for owned := false; !owned; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended before the handover")
			}
			if ev.Type == watch.Deleted {
				t.Fatal("the ConfigMap was deleted although another resource declares it")
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", ev.Object)
			}
			got, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				continue
			}
			if got.UID != cm.UID {
				t.Fatalf("the ConfigMap was replaced: UID %s, was %s", got.UID, cm.UID)
			}
			owned = got.Labels[v1alpha1.OwnerUIDLabel] == string(second.UID)
		case <-deadline:
			t.Fatal("the ConfigMap was never handed over to the second resource")
		}
	}
	waitVR(t, ns, "second", "became Ready, owning the object", isReady)
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(ctx, "first", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatal("the first resource was never finalized")
	}
}

// A Namespace that leaves the manifest is not deleted, with everything in
// it, unless the resource says so.
func TestNamespaceLeavingTheManifestIsNotPrunedWithoutOptIn(t *testing.T) {
	// Namespaces are cluster-scoped: a resource of the trusted namespace,
	// acting as the operator, declares one.
	name := fmt.Sprintf("prune-ns-%d", time.Now().UnixNano())
	target := "ns-" + name
	t.Cleanup(func() {
		_ = vidra.InfrahubV1alpha1().VidraResources(operatorNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), target, metav1.DeleteOptions{})
	})
	nsDoc := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", target)
	keep := ownershipConfigMap(name, map[string]string{"k": "v"})
	createVR(t, operatorNamespace, name, nsDoc+"---\n"+keep)
	waitVR(t, operatorNamespace, name, "became Ready", isReady)
	// Someone else's object in that namespace, which a prune would take along.
	if _, err := kube.CoreV1().ConfigMaps(target).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	setManifest(t, operatorNamespace, name, keep)
	vr := waitVR(t, operatorNamespace, name, "refused to prune the namespace", hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonPruneRefused))
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "pruneNamespacesAndCRDs") {
		t.Errorf("the message does not say how to allow it: %q", c.Message)
	}
	if !inInventory(vr, "Namespace", target) {
		t.Errorf("the namespace left the inventory: %v", vr.Status.ManagedResources)
	}
	if ns := getObject(t, namespaces, "", target); ns == nil || ns.GetDeletionTimestamp() != nil {
		t.Fatalf("the namespace was deleted: %v", ns)
	}

	testenv.UpdateVR(t, vidra, operatorNamespace, name, func(vr *v1alpha1.VidraResource) { vr.Spec.PruneNamespacesAndCRDs = true })
	waitObject(t, namespaces, "", target, "was pruned once allowed", func(o *unstructured.Unstructured) bool {
		return o == nil || o.GetDeletionTimestamp() != nil
	})
	waitVR(t, operatorNamespace, name, "became Ready", isReady)
}

// Under --watch-namespace, an installation's informer shows one namespace:
// an owner in any other looks deleted. The ownership check must ask the API
// server, not adopt the object.
func TestInstallationWatchingOneNamespaceDoesNotAdoptOthersObjects(t *testing.T) {
	owner := tenant(t)
	other := tenant(t)
	serviceAccount(t, other, "deployer", owner)
	manifest := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  namespace: %s\ndata:\n  from: %%s\n", owner)
	createVR(t, owner, "owner", fmt.Sprintf(manifest, "owner"), asServiceAccount("deployer"))
	waitVR(t, owner, "owner", "became Ready", isReady)
	cm := getObject(t, configMaps, owner, "shared")

	// A second installation, in the same cluster, that reconciles only the
	// other namespace.
	var mu sync.Mutex
	seen := map[string]bool{}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 100, 200
	ctx, cancel := context.WithCancel(context.Background())
	op, err := operator.New(ctx, operator.Options{Config: cfg, Namespace: operatorNamespace, WatchNamespace: other, Workers: 1, Linger: time.Second,
		OnReconcile: func(key cache.ObjectName, _ controller.Trigger, result string) {
			mu.Lock()
			defer mu.Unlock()
			seen[key.String()] = true
		}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- op.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("second installation: %v", err)
		}
	})

	// A resource that adopts orphans: only the lookup keeps it from
	// taking an object whose owner its installation cannot see.
	createVR(t, other, "grab", fmt.Sprintf(manifest, "grab"), asServiceAccount("deployer"), adoptingOrphans)
	// The barrier: the second installation reconciled the resource.
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return seen[other+"/grab"], nil
	}); err != nil {
		t.Fatal("the second installation never reconciled the resource")
	}
	waitVR(t, other, "grab", "reported the other owner", conflictWith(v1alpha1.ReasonOwnedByOther))
	cur := getObject(t, configMaps, owner, "shared")
	if cur == nil || cur.GetUID() != cm.GetUID() || cur.GetLabels()[v1alpha1.OwnerUIDLabel] != cm.GetLabels()[v1alpha1.OwnerUIDLabel] {
		t.Fatalf("the object was taken from its owner: %v", cur)
	}
	if v, _, _ := unstructured.NestedString(cur.Object, "data", "from"); v != "owner" {
		t.Fatalf("the object was changed: data.from = %q", v)
	}
}

func inInventory(vr *v1alpha1.VidraResource, kind, name string) bool {
	for _, m := range vr.Status.ManagedResources {
		if m.Kind == kind && m.Name == name {
			return true
		}
	}
	return false
}

// setManifest replaces the manifest of a resource.
func setManifest(t *testing.T, ns, name, manifest string) {
	t.Helper()
	testenv.UpdateVR(t, vidra, ns, name, func(vr *v1alpha1.VidraResource) { vr.Spec.Manifest = manifest })
}

// Anyone who may label an object can make it match Vidra's watch selector.
// Such objects must not fill the operator's caches, nor wake anything.
func TestTenantCannotFillTheOperatorsCachesByLabellingObjects(t *testing.T) {
	ns := tenant(t)
	vr := createVR(t, ns, "app", ownershipConfigMap("app", map[string]string{"k": "v"}), asServiceAccount("deployer"))
	waitVR(t, ns, "app", "became Ready", isReady)
	reg := vidraOp.Controller.Registry()
	ref := watchregistry.Ref{GVR: configMaps}
	rejectedBefore := reg.Stats().Filtered[watchregistry.FilterRejected]

	const squatters = 20
	for i := range squatters {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("squatter-%d", i),
			Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue},
		}, Data: map[string]string{"payload": strings.Repeat("x", 1024)}}
		if i%2 == 1 {
			// Forged marks: a UID that is no VidraResource's, and one that
			// is, under another resource's name.
			cm.Labels[v1alpha1.OwnerUIDLabel] = "00000000-0000-0000-0000-000000000000"
			cm.Annotations = map[string]string{v1alpha1.OwnedByAnnotation: ns + "/app"}
			if i%4 == 3 {
				cm.Labels[v1alpha1.OwnerUIDLabel] = string(vr.UID)
				cm.Annotations[v1alpha1.OwnedByAnnotation] = ns + "/other"
			}
		}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The barrier: an object Vidra applies after them is in its cache, so
	// the watch has delivered everything before it.
	setManifest(t, ns, "app", ownershipConfigMap("app", map[string]string{"k": "v"})+"---\n"+ownershipConfigMap("later", map[string]string{"k": "v"}))
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		_, err := reg.Get(ref, ns, "later")
		return err == nil, nil
	}); err != nil {
		t.Fatal("the later object never reached the operator's cache")
	}
	for i := range squatters {
		if _, err := reg.Get(ref, ns, fmt.Sprintf("squatter-%d", i)); !apierrors.IsNotFound(err) {
			t.Errorf("squatter-%d is in the operator's cache (err %v)", i, err)
		}
	}
	if got := reg.Stats().Filtered[watchregistry.FilterRejected] - rejectedBefore; got < squatters/2 {
		t.Errorf("%d events of objects with forged marks counted as rejected, want at least %d", got, squatters/2)
	}
}

// Anyone who may label objects in a namespace where a resource placed one
// can copy its marks, UID included, onto objects of their own. Editing
// such a copy in a loop must not keep that resource reconciling; its own
// object still wakes it.
func TestEditingACopyOfAManagedObjectDoesNotWakeItsResource(t *testing.T) {
	ns := tenant(t)
	createVR(t, ns, "app", ownershipConfigMap("app", map[string]string{"k": "v"}), asServiceAccount("deployer"))
	waitVR(t, ns, "app", "became Ready", isReady)
	ctx := t.Context()
	managed, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reg := vidraOp.Controller.Registry()
	unmapped := func() uint64 { return reg.Stats().Filtered[watchregistry.FilterUnmapped] }
	unmappedBefore := unmapped()

	copied := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "copy", Labels: managed.Labels, Annotations: managed.Annotations}, Data: map[string]string{"n": "0"}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, copied, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const edits = 10
	for i := 1; i <= edits; i++ {
		copied.Data["n"] = fmt.Sprint(i)
		if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, copied, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Every event of the copy, its creation and each edit, was handled and
	// mapped to no one: an event that woke the resource is not counted.
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return unmapped()-unmappedBefore >= edits+1, nil
	}); err != nil {
		t.Fatalf("%d of the copy's %d events were handled as waking no one, want all", unmapped()-unmappedBefore, edits+1)
	}

	// Its own object still wakes it.
	if err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatal("the deleted object of the resource was never restored")
	}
}

// A resource whose destination moves to another cluster must not forget
// the objects it left on the previous one: they are pruned there first.
func TestMovedDestinationCleansUpThePreviousCluster(t *testing.T) {
	remote, err := testenv.Start(t.Context(), testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remote.Stop)
	kc, err := remote.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	remoteKube := kubernetes.NewForConfigOrDie(remote.Config)
	// A resource of the trusted namespace, acting as the operator, with the
	// same namespace for its objects on both clusters.
	name := fmt.Sprintf("move-%d", time.Now().UnixNano())
	target := testenv.Namespace(t, kube, "move-")
	if _, err := remoteKube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: target}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets(operatorNamespace).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"kubeconfig": kc},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = vidra.InfrahubV1alpha1().VidraResources(operatorNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := vidra.InfrahubV1alpha1().VidraResources(operatorNamespace).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		_ = kube.CoreV1().Secrets(operatorNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	manifest := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: moving\n  namespace: %s\ndata:\n  k: v\n", target)
	createVR(t, operatorNamespace, name, manifest)
	vr := waitVR(t, operatorNamespace, name, "became Ready", isReady)
	if ic := vr.Status.InventoryCluster; ic == nil || ic.Server != "" || ic.KubeconfigSecretRef != nil {
		t.Errorf("status.inventoryCluster = %+v, want the local cluster", ic)
	}
	waitObject(t, configMaps, target, "moving", "was applied locally", func(o *unstructured.Unstructured) bool { return o != nil })

	testenv.UpdateVR(t, vidra, operatorNamespace, name, func(vr *v1alpha1.VidraResource) {
		vr.Spec.Destination.Server = remote.Config.Host
		vr.Spec.Destination.KubeconfigSecretRef = &v1alpha1.SecretKeyReference{Name: name, Key: "kubeconfig"}
	})
	waitVR(t, operatorNamespace, name, "became Ready on the new destination", func(vr *v1alpha1.VidraResource) bool {
		return isReady(vr) && vr.Status.InventoryCluster != nil && vr.Status.InventoryCluster.Server == remote.Config.Host
	})
	if _, err := remoteKube.CoreV1().ConfigMaps(target).Get(t.Context(), "moving", metav1.GetOptions{}); err != nil {
		t.Fatalf("not applied on the new destination: %v", err)
	}
	waitObject(t, configMaps, target, "moving", "was pruned from the previous destination", func(o *unstructured.Unstructured) bool { return o == nil })
}

// Deleting a resource whose objects live in a namespace that is itself
// being deleted must not wait for them: the namespace's deletion removes
// them, and may itself wait on finalizers that are none of Vidra's business.
func TestDeletionDoesNotWaitForObjectsOfATerminatingNamespace(t *testing.T) {
	name := fmt.Sprintf("term-%d", time.Now().UnixNano())
	target := testenv.Namespace(t, kube, "term-")
	// The resource lives in the operator's namespace, which outlives the
	// test: it goes here when the test failed before deleting it, once the
	// held ConfigMap is let go (the cleanup below runs first).
	t.Cleanup(func() {
		vrs := vidra.InfrahubV1alpha1().VidraResources(operatorNamespace)
		_ = vrs.Delete(context.Background(), name, metav1.DeleteOptions{})
		err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := vrs.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Errorf("cleanup: VidraResource %s/%s still there: %v", operatorNamespace, name, err)
		}
	})
	t.Cleanup(func() {
		// Let the held ConfigMap, and so the namespace, go.
		_, _ = kube.CoreV1().ConfigMaps(target).Patch(context.Background(), "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	createVR(t, operatorNamespace, name, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: %s\n", target))
	waitVR(t, operatorNamespace, name, "became Ready", isReady)
	// Someone else's finalizer holds the object, and so its namespace.
	if _, err := kube.CoreV1().ConfigMaps(target).Patch(t.Context(), "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":["example.com/hold"]}}`), metav1.PatchOptions{FieldManager: "other-controller"}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoreV1().Namespaces().Delete(t.Context(), target, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, namespaces, "", target, "started terminating", func(o *unstructured.Unstructured) bool {
		return o != nil && o.GetDeletionTimestamp() != nil
	})
	if err := vidra.InfrahubV1alpha1().VidraResources(operatorNamespace).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := vidra.InfrahubV1alpha1().VidraResources(operatorNamespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatal("the resource's deletion waited for an object of a terminating namespace")
	}
}

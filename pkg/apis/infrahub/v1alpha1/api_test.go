// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	applyv1alpha1 "github.com/vidra-operator/vidra/pkg/generated/applyconfiguration/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/generated/clientset/versioned"
	"github.com/vidra-operator/vidra/pkg/generated/informers/externalversions"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.RunMain(m, &env, testenv.Options{}) }

// setup installs the CRD (idempotent) and gives the test its own namespace.
func setup(t *testing.T) (versioned.Interface, string) {
	t.Helper()
	ctx := t.Context()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := testenv.InstallCRDs(ctx, env.Config, filepath.Join(root, "manifests/crd/infrahub.operators.com_vidraresources.yaml")); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "api-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	return versioned.NewForConfigOrDie(env.Config), ns.Name
}

// kubectl runs the kubectl built with the control plane, retrying while
// discovery has not caught up with a CRD that was just established.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	var out []byte
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		cmd := exec.CommandContext(ctx, env.Kubectl(), append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")}, args...)...)
		out, err = cmd.CombinedOutput()
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func decode(t *testing.T, data []byte) *v1alpha1.VidraResource {
	t.Helper()
	vr := &v1alpha1.VidraResource{}
	if err := yaml.UnmarshalStrict(data, vr); err != nil {
		t.Fatalf("decode VidraResource: %v", err)
	}
	return vr
}

// vidraResourceDocument returns the VidraResource of a sample file, which
// may also hold what the resource needs (a tenant's ServiceAccount and
// RoleBinding).
func vidraResourceDocument(t *testing.T, data []byte) []byte {
	t.Helper()
	for doc := range strings.SplitSeq(string(data), "\n---\n") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err == nil && head.Kind == "VidraResource" {
			return []byte(doc)
		}
	}
	t.Fatalf("no VidraResource in the sample")
	return nil
}

func TestCRDIsEstablishedAndExplained(t *testing.T) {
	setup(t)
	out := kubectl(t, "explain", "vidraresource.spec.destination")
	for _, field := range []string{"server", "namespace", "reconcileOnEvents", "kubeconfigSecretRef"} {
		if !strings.Contains(out, field) {
			t.Errorf("kubectl explain misses field %q:\n%s", field, out)
		}
	}
	if !strings.Contains(out, "API server URL of the destination") {
		t.Errorf("kubectl explain lacks the field descriptions:\n%s", out)
	}
}

const specSample = `apiVersion: infrahub.operators.com/v1alpha1
kind: VidraResource
metadata:
  name: vidraresource-sample
spec:
  destination:
    namespace: default
    reconcileOnEvents: true
  manifest: '{"apiVersion": "v1","kind": "Namespace","metadata":{"name": "ns-sample"}}'
`

func TestSamplesAreAccepted(t *testing.T) {
	cs, _ := setup(t)
	root, _ := testenv.RepoRoot()
	samples := map[string][]byte{"SPEC section 2": []byte(specSample)}
	files, err := filepath.Glob(filepath.Join(root, "manifests/samples/*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("samples: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		samples[filepath.Base(f)] = data
	}
	for name, data := range samples {
		t.Run(name, func(t *testing.T) {
			// Each sample in a namespace of its own: two samples share a name.
			_, ns := setup(t)
			vr := decode(t, vidraResourceDocument(t, data))
			vr.Namespace = ""
			got, err := cs.InfrahubV1alpha1().VidraResources(ns).Create(t.Context(), vr, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("sample rejected: %v", err)
			}
			if got.Spec.Manifest != vr.Spec.Manifest {
				t.Errorf("manifest changed on the way in")
			}
			if got.Spec.DeletionPolicy != v1alpha1.DeletionPolicyDelete || got.Spec.Prune == nil || !*got.Spec.Prune {
				t.Errorf("defaults not applied: deletionPolicy=%q prune=%v", got.Spec.DeletionPolicy, got.Spec.Prune)
			}
		})
	}
}

func TestInvalidInputIsRejectedNamingTheField(t *testing.T) {
	cs, ns := setup(t)
	base := func() *v1alpha1.VidraResource {
		return &v1alpha1.VidraResource{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "invalid-"},
			Spec:       v1alpha1.VidraResourceSpec{Manifest: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`},
		}
	}
	tests := []struct {
		name   string
		mutate func(*v1alpha1.VidraResource)
		field  string
	}{
		{"unknown deletionPolicy", func(vr *v1alpha1.VidraResource) { vr.Spec.DeletionPolicy = "Keep" }, "spec.deletionPolicy"},
		{"interval that is no duration", func(vr *v1alpha1.VidraResource) {
			vr.Spec.Interval = nil
		}, "spec.interval"},
		{"empty manifest", func(vr *v1alpha1.VidraResource) { vr.Spec.Manifest = "" }, "spec.manifest"},
		{"manifestFrom entry naming a ConfigMap and a Secret", func(vr *v1alpha1.VidraResource) {
			ref := &v1alpha1.SourceKeyReference{Name: "x"}
			vr.Spec.ManifestFrom = []v1alpha1.ManifestSource{{ConfigMapRef: ref, SecretRef: ref}}
		}, "spec.manifestFrom[0]"},
		{"more than 16 manifestFrom references", func(vr *v1alpha1.VidraResource) {
			for i := range 17 {
				vr.Spec.ManifestFrom = append(vr.Spec.ManifestFrom, v1alpha1.ManifestSource{ConfigMapRef: &v1alpha1.SourceKeyReference{Name: fmt.Sprint("c", i)}})
			}
		}, "spec.manifestFrom"},
		{"unknown manifestEncoding", func(vr *v1alpha1.VidraResource) { vr.Spec.ManifestEncoding = "zstd" }, "spec.manifestEncoding"},
		{"server that is no URL", func(vr *v1alpha1.VidraResource) { vr.Spec.Destination.Server = "not a url" }, "spec.destination.server"},
		{"timeout under a second", func(vr *v1alpha1.VidraResource) {
			vr.Spec.Timeout = &metav1.Duration{Duration: 10 * time.Millisecond}
		}, "spec.timeout"},
		{"dependency without a name", func(vr *v1alpha1.VidraResource) {
			vr.Spec.DependsOn = []v1alpha1.DependencyReference{{Namespace: "x"}}
		}, "spec.dependsOn[0].name"},
		{"more than 64 dependencies", func(vr *v1alpha1.VidraResource) {
			for i := range 65 {
				vr.Spec.DependsOn = append(vr.Spec.DependsOn, v1alpha1.DependencyReference{Name: fmt.Sprint("d", i)})
			}
		}, "spec.dependsOn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vr := base()
			tt.mutate(vr)
			var err error
			if tt.field == "spec.interval" {
				// metav1.Duration cannot hold "soon", so send raw JSON.
				body := `{"apiVersion":"infrahub.operators.com/v1alpha1","kind":"VidraResource","metadata":{"generateName":"invalid-"},` +
					`"spec":{"manifest":"{}","interval":"soon"}}`
				err = cs.InfrahubV1alpha1().RESTClient().Post().Namespace(ns).Resource("vidraresources").
					Body([]byte(body)).SetHeader("Content-Type", "application/json").Do(t.Context()).Error()
			} else {
				_, err = cs.InfrahubV1alpha1().VidraResources(ns).Create(t.Context(), vr, metav1.CreateOptions{})
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want Invalid, got %v", err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error does not name %s: %v", tt.field, err)
			}
		})
	}
	// The boundaries that must stay accepted.
	ok := base()
	ok.Spec.Interval = &metav1.Duration{Duration: 90 * time.Second}
	ok.Spec.Destination.Server = "https://kubernetes.default.svc"
	ok.Spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan
	if _, err := cs.InfrahubV1alpha1().VidraResources(ns).Create(t.Context(), ok, metav1.CreateOptions{}); err != nil {
		t.Fatalf("valid resource rejected: %v", err)
	}
	from := base()
	from.Spec.Manifest = ""
	from.Spec.ManifestFrom = []v1alpha1.ManifestSource{{SecretRef: &v1alpha1.SourceKeyReference{Name: "bundle", Key: "crds.yaml.gz"}}}
	if _, err := cs.InfrahubV1alpha1().VidraResources(ns).Create(t.Context(), from, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a resource with manifestFrom and no manifest rejected: %v", err)
	}
	zero := base()
	zero.Spec.Interval = &metav1.Duration{}
	if _, err := cs.InfrahubV1alpha1().VidraResources(ns).Create(t.Context(), zero, metav1.CreateOptions{}); err != nil {
		t.Fatalf("interval 0 rejected: %v", err)
	}
}

func TestTypedClientRoundTrip(t *testing.T) {
	cs, ns := setup(t)
	vrs := cs.InfrahubV1alpha1().VidraResources(ns)

	factory := externalversions.NewSharedInformerFactoryWithOptions(cs, 0, externalversions.WithNamespace(ns))
	lister := factory.Infrahub().V1alpha1().VidraResources().Lister()
	// Shutdown waits for the informers, so their context must end first.
	defer factory.Shutdown()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	factory.Start(ctx.Done())

	w, err := vrs.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	_, err = vrs.Create(ctx, &v1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "typed"},
		Spec:       v1alpha1.VidraResourceSpec{Manifest: "kind: ConfigMap"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if got := ev.Object.(*v1alpha1.VidraResource); got.Name != "typed" {
			t.Fatalf("watch delivered %s", got.Name)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event for the created resource")
	}
	if _, err := vrs.Get(ctx, "typed", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := vrs.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list = %v, %v", list, err)
	}

	// Server-side apply through the generated apply configurations.
	applied, err := vrs.Apply(ctx, applyv1alpha1.VidraResource("typed", ns).
		WithSpec(applyv1alpha1.VidraResourceSpec().WithManifest("kind: Secret").WithSuspend(true)),
		metav1.ApplyOptions{FieldManager: "api-test", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if !applied.Spec.Suspend || applied.Spec.Manifest != "kind: Secret" {
		t.Fatalf("apply did not take: %+v", applied.Spec)
	}
	extracted, err := applyv1alpha1.ExtractVidraResource(applied, "api-test")
	if err != nil || extracted.Spec == nil || extracted.Spec.Suspend == nil || !*extracted.Spec.Suspend {
		t.Fatalf("extract of api-test's fields = %+v, %v", extracted, err)
	}

	// The status subresource.
	applied.Status.DeployState = v1alpha1.DeployStateSucceeded
	applied.Status.ObservedGeneration = applied.Generation
	applied.Status.ManagedResources = []v1alpha1.ManagedResource{{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "x"}}
	applied.Status.ManagedCount = 1
	updated, err := vrs.UpdateStatus(ctx, applied, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Status.DeployState != v1alpha1.DeployStateSucceeded || updated.Generation != applied.Generation {
		t.Fatalf("status update: %+v (generation %d -> %d)", updated.Status, applied.Generation, updated.Generation)
	}

	// The lister of the generated informer factory catches up.
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		got, err := lister.VidraResources(ns).Get("typed")
		return err == nil && got.Status.DeployState == v1alpha1.DeployStateSucceeded, nil
	})
	if err != nil {
		t.Fatalf("lister never saw the status update: %v", err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), factory.Infrahub().V1alpha1().VidraResources().Informer().HasSynced) {
		t.Fatal("informer not synced")
	}
}

func TestPrinterColumnsShowStatus(t *testing.T) {
	cs, ns := setup(t)
	ctx := t.Context()
	vr, err := cs.InfrahubV1alpha1().VidraResources(ns).Create(ctx, &v1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "columns"},
		Spec:       v1alpha1.VidraResourceSpec{Manifest: "kind: ConfigMap"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vr.Status = v1alpha1.VidraResourceStatus{
		DeployState:  v1alpha1.DeployStateSucceeded,
		ManagedCount: 4,
		Conditions: []metav1.Condition{{
			Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReconciled,
			Message: "4 objects in sync", LastTransitionTime: metav1.Now(),
		}, {
			Type: v1alpha1.ConditionHealthy, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonProgressing,
			Message: "1 object not healthy yet", LastTransitionTime: metav1.Now(),
		}},
	}
	if _, err := cs.InfrahubV1alpha1().VidraResources(ns).UpdateStatus(ctx, vr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The Table API is what kubectl get renders.
	table := &metav1.Table{}
	err = cs.InfrahubV1alpha1().RESTClient().Get().Namespace(ns).Resource("vidraresources").Name("columns").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Into(table)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	if got, want := strings.Join(names, ","), "Name,Ready,Healthy,Status,Managed,Age,Message"; got != want {
		t.Fatalf("columns = %s, want %s", got, want)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("rows = %d", len(table.Rows))
	}
	cells := table.Rows[0].Cells
	if cells[1] != "True" || cells[2] != "Progressing" || cells[3] != "Succeeded" || cells[4] != int64(4) || cells[6] != "4 objects in sync" {
		t.Fatalf("cells = %#v", cells)
	}

	wide := kubectl(t, "get", "vr", "-n", ns, "-o", "wide")
	if !strings.Contains(wide, "MESSAGE") || !strings.Contains(wide, "4 objects in sync") || !strings.Contains(wide, "Succeeded") {
		t.Fatalf("kubectl get vr -o wide:\n%s", wide)
	}
}

// TestFinalizerPolicyAddsTheFinalizerOnCreate checks the optional
// MutatingAdmissionPolicy of manifests/admission: a VidraResource is created
// with Vidra's finalizer, next to any finalizer of its creator, so the
// operator needs no write of its own to add it.
func TestFinalizerPolicyAddsTheFinalizerOnCreate(t *testing.T) {
	vidra, ns := setup(t)
	ctx := t.Context()
	if err := testenv.InstallFinalizerPolicy(ctx, env.Config); err != nil {
		t.Fatal(err)
	}
	// Later tests create resources without the policy.
	t.Cleanup(func() {
		if err := testenv.DeleteFinalizerPolicy(context.Background(), env.Config); err != nil {
			t.Error(err)
		}
	})

	vrs := vidra.InfrahubV1alpha1().VidraResources(ns)
	vr := &v1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "with-own-finalizer", Finalizers: []string{"example.com/keep"}},
		Spec:       v1alpha1.VidraResourceSpec{Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\n"},
	}
	got, err := vrs.Create(ctx, vr, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = vrs.Patch(context.Background(), vr.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	if want := []string{"example.com/keep", v1alpha1.Finalizer}; !slices.Equal(got.Finalizers, want) {
		t.Fatalf("finalizers: %v, want %v", got.Finalizers, want)
	}
}

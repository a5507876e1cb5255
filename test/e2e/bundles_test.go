// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/restmapper"

	"github.com/vidra-operator/vidra/internal/plugin/commands"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// vidraCommand runs kubectl-vidra's commands in-process against the test
// control plane and returns what they printed.
func vidraCommand(t *testing.T, args ...string) string {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	root := commands.NewRoot(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	root.SetArgs(append([]string{"--kubeconfig", kc}, args...))
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("kubectl vidra %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// bundleFile writes testdata/bundles/name, decompressed, into a
// temporary file and returns its path.
func bundleFile(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "bundles", name+".gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, text, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// inventoryVersions returns the resourceVersion of every object of vr's
// inventory, by "Kind namespace/name".
func inventoryVersions(t *testing.T, vr *v1alpha1.VidraResource) map[string]string {
	t.Helper()
	groups, err := restmapper.GetAPIGroupResources(kube.Discovery())
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	out := map[string]string{}
	for _, m := range vr.Status.ManagedResources {
		gv, err := schema.ParseGroupVersion(m.APIVersion)
		if err != nil {
			t.Fatal(err)
		}
		mapping, err := mapper.RESTMapping(gv.WithKind(m.Kind).GroupKind(), gv.Version)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := dyn.Resource(mapping.Resource).Namespace(m.Namespace).Get(t.Context(), m.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s %s/%s: %v", m.Kind, m.Namespace, m.Name, err)
		}
		out[m.Kind+" "+m.Namespace+"/"+m.Name] = obj.GetResourceVersion()
	}
	return out
}

// bundleCase is a published bundle and what its test checks.
type bundleCase struct {
	// file is in testdata/bundles, gzip-compressed; name is the resource's.
	file, name string
	// args are extra flags of kubectl vidra create.
	args    []string
	objects int32
	// crd and deployment name an object of the bundle, checked applied,
	// and (the Deployment, namespace/name) deleted and restored.
	crd, deploymentNS, deployment string
}

// TestArgoCDInstallThroughCreate deploys Argo CD's published install (2.1
// MB, its ApplicationSet CRD alone 1.5 MB: more than one VidraResource can
// hold) with one kubectl vidra create, then checks that it converges, stays
// idle without a write, repairs a deleted Deployment, and leaves nothing
// once deleted. The control plane runs no kubelet: applied and in sync is
// what Ready means here, as in every other test of this suite.
func TestArgoCDInstallThroughCreate(t *testing.T) {
	testBundle(t, bundleCase{file: "argocd-v3.6.1-install.yaml", name: "argocd", objects: 60,
		crd: "applicationsets.argoproj.io", deployment: "argocd-server"})
}

// TestGatekeeperThroughCreate does the same with Gatekeeper's (28
// objects: 14 CRDs, a validating and a mutating webhook configuration,
// objects in a namespace of its own). At 243 KB it would fit in
// spec.manifest; --configmaps puts it in a ConfigMap all the same. Its
// webhooks have no server here: the validating one that fails closed only
// matches Namespaces, which nothing writes while the test runs.
func TestGatekeeperThroughCreate(t *testing.T) {
	testBundle(t, bundleCase{file: "gatekeeper-v3.18.2.yaml", name: "gatekeeper", args: []string{"--configmaps"}, objects: 28,
		crd: "constrainttemplates.templates.gatekeeper.sh", deploymentNS: "gatekeeper-system", deployment: "gatekeeper-controller-manager"})
}

func testBundle(t *testing.T, bc bundleCase) {
	ns := namespace(t)
	if bc.deploymentNS == "" {
		bc.deploymentNS = ns
	}
	// Created first, the barrier has the informers running when the
	// bundle comes, so that their first lists do not wake it.
	b := newBarrier(t, ns, configMaps, services, deployments)
	path := bundleFile(t, bc.file)

	printed := vidraCommand(t, append([]string{"create", bc.name, "-n", ns, "-f", path}, bc.args...)...)
	if !strings.Contains(printed, "configmap/"+bc.name+"-manifest-0 created") || !strings.Contains(printed, fmt.Sprintf("(%d objects from 1 file)", bc.objects)) {
		t.Fatalf("create printed:\n%s", printed)
	}
	t.Cleanup(func() {
		// The CRDs are cluster-scoped: the namespace's deletion does not
		// take them; the resource's deletion policy does.
		_ = vidra.InfrahubV1alpha1().VidraResources(ns).Delete(context.Background(), bc.name, metav1.DeleteOptions{})
	})
	vr := waitReady(t, ns, bc.name)
	if vr.Status.ManagedCount != bc.objects {
		t.Fatalf("managed %d objects, want the bundle's %d", vr.Status.ManagedCount, bc.objects)
	}
	if len(vr.Spec.Manifest) != 0 || len(vr.Spec.ManifestFrom) == 0 || len(vr.Status.ManifestFrom) != len(vr.Spec.ManifestFrom) {
		t.Fatalf("spec.manifest is %d bytes, spec.manifestFrom %v, status.manifestFrom %v: want the bundle in ConfigMaps, with their sums", len(vr.Spec.Manifest), vr.Spec.ManifestFrom, vr.Status.ManifestFrom)
	}
	for _, ref := range vr.Spec.ManifestFrom {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), ref.ConfigMapRef.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != vr.UID {
			t.Errorf("ConfigMap %s is owned by %v, want the VidraResource", cm.Name, cm.OwnerReferences)
		}
	}
	waitObject(t, crds, "", bc.crd, "was applied", exists)

	// Converged, it stays quiet: a reconcile writes nothing.
	b.pass(t)
	reconciled(t, ns, bc.name)
	vr = waitReady(t, ns, bc.name)
	before := inventoryVersions(t, vr)
	b.pass(t)
	reconciled(t, ns, bc.name)
	after := inventoryVersions(t, vr)
	for k, rv := range before {
		if after[k] != rv {
			t.Errorf("%s was written while idle: resourceVersion %s, then %s", k, rv, after[k])
		}
	}

	// A deleted Deployment is back.
	old := waitObject(t, deployments, bc.deploymentNS, bc.deployment, "exists", exists)
	if err := kube.AppsV1().Deployments(bc.deploymentNS).Delete(t.Context(), bc.deployment, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, deployments, bc.deploymentNS, bc.deployment, "was restored", func(o *unstructured.Unstructured) bool { return o.GetUID() != old.GetUID() })

	// Deleted, it leaves nothing: its objects, the CRDs among them, and
	// the ConfigMaps it owns.
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), bc.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A bundle's deletion sends a request or two per object (60 for Argo
	// CD) and waits for its CRDs' finalizers: while other suites load the
	// machine, that takes longer than one object's wait.
	pollObjectWithin(t, 3*time.Minute, dyn, "", vrResource, ns, bc.name, "was deleted", func(obj *unstructured.Unstructured) bool { return obj == nil })
	waitGone(t, crds, "", bc.crd, "was deleted with the resource")
	waitGone(t, deployments, bc.deploymentNS, bc.deployment, "was deleted with the resource")
	for _, ref := range vr.Spec.ManifestFrom {
		waitGone(t, configMaps, ns, ref.ConfigMapRef.Name, "was deleted with its owner")
	}
	left, err := kube.RbacV1().ClusterRoles().List(t.Context(), metav1.ListOptions{LabelSelector: v1alpha1.OwnerUIDLabel + "=" + string(vr.UID)})
	if err != nil || len(left.Items) != 0 {
		t.Errorf("ClusterRoles left after the deletion: %v, %v", left, err)
	}
}

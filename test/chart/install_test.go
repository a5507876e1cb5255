// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package chart_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// helm install puts the CRDs, the RBAC, the ServiceAccount and the
// ConfigMap in place, and an operator run as the chart's ServiceAccount,
// with the chart Deployment's flags, makes a VidraResource Ready; helm
// upgrade changes a flag (the Deployment's, and the operator restarted
// with it still reconciles) without losing a resource; helm uninstall
// removes the operator's objects and leaves the CRDs, the VidraResource and
// what it applied.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	// The README's command: release vidra in vidra-system.
	const ns, release = installNamespace, "vidra"
	t.Cleanup(func() { releaseNamespace(ns) })

	helm(t, "install", release, chartDir, "--namespace", ns, "--create-namespace")
	waitCRDsEstablished(t)
	op := startAsTheChart(t, ns)

	testenv.CreateVR(t, vidra, ns, "hello", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hello-vidra\ndata:\n  greeting: hello\n")
	waitReady(t, ns, "hello")
	vrUID := uidOf(t, "VidraResource", func(ctx context.Context) (metav1.Object, error) {
		return vidra.InfrahubV1alpha1().VidraResources(ns).Get(ctx, "hello", metav1.GetOptions{})
	})
	cmUID := uidOf(t, "ConfigMap", func(ctx context.Context) (metav1.Object, error) {
		return kube.CoreV1().ConfigMaps(ns).Get(ctx, "hello-vidra", metav1.GetOptions{})
	})
	crdUIDs := crdUIDs(t)

	t.Log("helm upgrade: a flag changes, nothing is lost")
	helm(t, "upgrade", release, chartDir, "--namespace", ns, "--reuse-values", "--set", "logLevel=debug")
	if args := deploymentArgs(t, ns); !slices.Contains(args, "--log-level=debug") {
		t.Fatalf("after the upgrade the Deployment's args are %v, want --log-level=debug among them", args)
	}
	op.Stop(10 * time.Second)
	startAsTheChart(t, ns)
	testenv.UpdateVR(t, vidra, ns, "hello", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Manifest = strings.Replace(vr.Spec.Manifest, "greeting: hello", "greeting: upgraded", 1)
	})
	waitReady(t, ns, "hello")
	if cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "hello-vidra", metav1.GetOptions{}); err != nil || cm.Data["greeting"] != "upgraded" || cm.UID != cmUID {
		t.Errorf("after the upgrade the applied ConfigMap is %v (err %v), want greeting upgraded and the same object", cm, err)
	}
	assertKept(t, ns, vrUID, crdUIDs)

	t.Log("helm uninstall: the operator's objects go, the CRDs and users' resources stay")
	helm(t, "uninstall", release, "--namespace", ns, "--wait", "--timeout", "2m")
	if _, err := kube.RbacV1().ClusterRoles().Get(t.Context(), "vidra-manager", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the ClusterRole vidra-manager outlived helm uninstall (err %v)", err)
	}
	if _, err := kube.AppsV1().Deployments(ns).Get(t.Context(), "vidra", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment outlived helm uninstall (err %v)", err)
	}
	assertKept(t, ns, vrUID, crdUIDs)
	if cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "hello-vidra", metav1.GetOptions{}); err != nil || cm.UID != cmUID {
		t.Errorf("the ConfigMap the resource applied did not outlive helm uninstall (err %v)", err)
	}
}

// startAsTheChart runs the operator as the chart's ServiceAccount in ns,
// with the args of the Deployment the chart installed (their listen
// addresses aside: the process listens on loopback ports of its own), until
// the test ends or it is stopped.
func startAsTheChart(t *testing.T, ns string) *testenv.VidraProcess {
	t.Helper()
	var args []string
	for _, a := range deploymentArgs(t, ns) {
		if !strings.HasPrefix(a, "--metrics-bind-address=") && !strings.HasPrefix(a, "--health-probe-bind-address=") {
			args = append(args, a)
		}
	}
	tmp := t.TempDir()
	kc := filepath.Join(tmp, "kubeconfig")
	// What the API server makes of the ServiceAccount's token.
	if err := env.WriteUserKubeconfig(kc, "system:serviceaccount:"+ns+":vidra",
		"system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated"); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(tmp, "vidra.log")
	p, err := testenv.StartVidra(testenv.VidraOptions{Binary: vidraBinary, Kubeconfig: kc, Namespace: ns, LogPath: logPath, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("log of vidra (tail):\n%s", tailLines(string(data), 40))
		}
	})
	if err := p.WaitReady(t.Context(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return p
}

// deploymentArgs are the args of the operator's container in the
// Deployment the chart installed.
func deploymentArgs(t *testing.T, ns string) []string {
	t.Helper()
	d, err := kube.AppsV1().Deployments(ns).Get(t.Context(), "vidra", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Args
}

func waitReady(t *testing.T, ns, name string) {
	t.Helper()
	testenv.WaitVR(t, vidra, ns, name, "became Ready", func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == vr.Generation
	})
}

var chartCRDs = []string{"vidraresources.infrahub.operators.com", "infrahubsyncs.infrahub.operators.com"}

func waitCRDsEstablished(t *testing.T) {
	t.Helper()
	for _, name := range chartCRDs {
		if err := testenv.WaitCRDEstablished(t.Context(), dynamicClient(), name, time.Minute); err != nil {
			t.Fatalf("CRD %s: %v", name, err)
		}
	}
}

func crdUIDs(t *testing.T) map[string]types.UID {
	t.Helper()
	uids := map[string]types.UID{}
	for _, name := range chartCRDs {
		crd, err := dynamicClient().Resource(testenv.CRDResource).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[name] = crd.GetUID()
	}
	return uids
}

// assertKept checks that the CRDs and the VidraResource are the objects
// they were.
func assertKept(t *testing.T, ns string, vrUID types.UID, crds map[string]types.UID) {
	t.Helper()
	now := crdUIDs(t)
	for name, uid := range crds {
		if now[name] != uid {
			t.Errorf("CRD %s was replaced or removed", name)
		}
	}
	vr, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(t.Context(), "hello", metav1.GetOptions{})
	if err != nil || vr.UID != vrUID {
		t.Errorf("the VidraResource was lost (err %v)", err)
	}
}

func uidOf(t *testing.T, what string, get func(context.Context) (metav1.Object, error)) types.UID {
	t.Helper()
	o, err := get(t.Context())
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return o.GetUID()
}

// releaseNamespace deletes what a test left in ns once its operator is
// gone: the VidraResources' finalizers are the operator's, so they are
// dropped first, then the namespace.
func releaseNamespace(ns string) {
	ctx := context.Background()
	list, err := vidra.InfrahubV1alpha1().VidraResources(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, vr := range list.Items {
			_, _ = vidra.InfrahubV1alpha1().VidraResources(ns).Patch(ctx, vr.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			_ = vidra.InfrahubV1alpha1().VidraResources(ns).Delete(ctx, vr.Name, metav1.DeleteOptions{})
		}
	}
	syncs, err := vidra.InfrahubV1alpha1().InfrahubSyncs(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, s := range syncs.Items {
			_, _ = vidra.InfrahubV1alpha1().InfrahubSyncs(ns).Patch(ctx, s.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			_ = vidra.InfrahubV1alpha1().InfrahubSyncs(ns).Delete(ctx, s.Name, metav1.DeleteOptions{})
		}
	}
	_ = kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func dynamicClient() dynamic.Interface { return dynamic.NewForConfigOrDie(env.Config) }

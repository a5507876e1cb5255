// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller"
)

// remoteCluster is a second control plane, the destination of the tests of
// remote destinations.
type remoteCluster struct {
	env  *testenv.Env
	kube kubernetes.Interface
	dyn  dynamic.Interface
	// kubeconfig is an admin kubeconfig for it, as a user would put in a
	// Secret.
	kubeconfig []byte
}

// server is the URL resources name in spec.destination.server.
func (rc *remoteCluster) server() string { return rc.env.Config.Host }

// TestRemoteDestinations runs the behaviours of remote destinations against
// one second control plane, started for them. Each subtest sets up its own
// namespace (on both clusters), Secret and resources, so that any runs
// alone (-run 'TestRemoteDestinations/Outage'); the hung server and the
// outage, which stop the shared API server for a while, come last.
func TestRemoteDestinations(t *testing.T) {
	e, err := testenv.Start(t.Context(), testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	kc, err := e.Kubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	rc := &remoteCluster{env: e, kube: kubernetes.NewForConfigOrDie(e.Config), dyn: dynamic.NewForConfigOrDie(e.Config), kubeconfig: kc}

	t.Run("AppliesThroughKubeconfigSecret", func(t *testing.T) { testAppliesThroughKubeconfigSecret(t, rc) })
	t.Run("DriftIsCorrectedByEvents", func(t *testing.T) { testRemoteDriftIsCorrectedByEvents(t, rc) })
	t.Run("CRDOnlyOnRemoteClusterIsMapped", func(t *testing.T) { testCRDOnlyOnRemoteClusterIsMapped(t, rc) })
	t.Run("ServiceAccountIsImpersonatedOnTheRemoteCluster", func(t *testing.T) { testRemoteImpersonation(t, rc) })
	t.Run("LegacyLabelledSecretOnlyFromOperatorNamespace", func(t *testing.T) { testLegacyLabelledSecret(t, rc) })
	t.Run("RotatedSecretIsUsed", func(t *testing.T) { testRotatedSecretIsUsed(t, rc) })
	t.Run("BadKubeconfigIsReported", func(t *testing.T) { testBadKubeconfigIsReported(t, rc) })
	t.Run("MissingSecretIsReportedAndDeletionCompletes", func(t *testing.T) { testMissingSecret(t, rc) })
	t.Run("HungServerIsReported", func(t *testing.T) { testHungServer(t, rc) })
	t.Run("Outage", func(t *testing.T) { testOutage(t, rc) })
}

// remoteNamespace creates, on both clusters, a namespace for one subtest:
// the resources live in the local one, their objects go to the remote one
// of the same name.
func remoteNamespace(t *testing.T, rc *remoteCluster) string {
	t.Helper()
	ns := namespace(t)
	if _, err := rc.kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

// kubeconfigSecret stores a kubeconfig in a Secret of namespace ns.
func kubeconfigSecret(t *testing.T, ns, name string, kubeconfig []byte, labels map[string]string) {
	t.Helper()
	_, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Data:       map[string][]byte{"kubeconfig": kubeconfig},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func setSecretData(t *testing.T, ns, name string, kubeconfig []byte) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s.Data = map[string][]byte{"kubeconfig": kubeconfig}
		_, err = kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// toRemote points a resource at rc through the kubeconfig in Secret secret.
func toRemote(rc *remoteCluster, secret string) func(*v1alpha1.VidraResource) {
	return func(vr *v1alpha1.VidraResource) {
		vr.Spec.Destination.Server = rc.server()
		vr.Spec.Destination.KubeconfigSecretRef = &v1alpha1.SecretKeyReference{Name: secret, Key: "kubeconfig"}
	}
}

// waitRemote polls one object of the remote cluster until it exists and
// cond holds.
func waitRemote(t *testing.T, rc *remoteCluster, gvr schema.GroupVersionResource, ns, name, what string, cond func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	return waitObjectIn(t, rc.dyn, " on the remote cluster", gvr, ns, name, what, cond)
}

// waitRemoteGone polls one object of the remote cluster until it does not
// exist.
func waitRemoteGone(t *testing.T, rc *remoteCluster, gvr schema.GroupVersionResource, ns, name, what string) {
	t.Helper()
	waitGoneIn(t, rc.dyn, " on the remote cluster", gvr, ns, name, what)
}

// failsWithMessage waits for Ready=False with reason and a message that
// contains every fragment.
func failsWithMessage(t *testing.T, ns, name, reason string, fragments ...string) *v1alpha1.VidraResource {
	t.Helper()
	return waitVR(t, ns, name, fmt.Sprintf("reported %s with %q", reason, fragments), func(vr *v1alpha1.VidraResource) bool {
		if !hasCondition(v1alpha1.ConditionReady, metav1.ConditionFalse, reason)(vr) {
			return false
		}
		for _, f := range fragments {
			if !strings.Contains(readyMessage(vr), f) {
				return false
			}
		}
		return true
	})
}

func testAppliesThroughKubeconfigSecret(t *testing.T, rc *remoteCluster) {
	ns := remoteNamespace(t, rc)
	kubeconfigSecret(t, ns, "remote", rc.kubeconfig, nil)
	createVR(t, ns, "app", docs(configMap("settings", map[string]string{"a": "1"}), serviceDoc), toRemote(rc, "remote"))
	vr := waitReady(t, ns, "app")
	if vr.Status.ManagedCount != 2 {
		t.Fatalf("inventory = %+v", vr.Status.ManagedResources)
	}
	cm := waitRemote(t, rc, configMaps, ns, "settings", "was applied", exists)
	if cm.GetLabels()[v1alpha1.OwnerUIDLabel] != string(vr.UID) || cm.GetAnnotations()[v1alpha1.OwnedByAnnotation] != ns+"/app" {
		t.Errorf("marks missing on the remote object: %v %v", cm.GetLabels(), cm.GetAnnotations())
	}
	waitRemote(t, rc, services, ns, "web", "was applied", exists)
	if _, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the object also went to the local cluster (err %v)", err)
	}

	// Deleting the resource deletes the remote objects.
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRemoteGone(t, rc, configMaps, ns, "settings", "was deleted")
	waitRemoteGone(t, rc, services, ns, "web", "was deleted")
	waitVRGone(t, ns, "app")
}

// testRemoteImpersonation: serviceAccountName names a ServiceAccount of the
// remote cluster, which every write there is made as; the local cluster has
// no such ServiceAccount, but its name must be allowed to read the
// kubeconfig Secret there: Vidra reads it for no identity that could not.
func testRemoteImpersonation(t *testing.T, rc *remoteCluster) {
	ns := remoteNamespace(t, rc)
	user, err := testenv.CreateConfigMapTenant(t.Context(), rc.kube, ns, "tenant")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigSecret(t, ns, "remote", rc.kubeconfig, nil)
	createVR(t, ns, "allowed", configMap("tenant-settings", map[string]string{"a": "1"}), toRemote(rc, "remote"), asTenant)
	failsWithMessage(t, ns, "allowed", v1alpha1.ReasonForbidden, "ServiceAccount "+ns+"/tenant may not get Secret "+ns+"/remote")
	if _, err := rc.kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "tenant-settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("applied through a Secret its identity may not read (err %v)", err)
	}

	allowSecret(t, ns, "tenant", "remote")
	// A grant is no event Vidra watches: the backoff's next retry sees it.
	waitReady(t, ns, "allowed")
	waitRemote(t, rc, configMaps, ns, "tenant-settings", "was applied as the tenant", exists)

	createVR(t, ns, "refused", serviceDoc, toRemote(rc, "remote"), asTenant)
	failsWithMessage(t, ns, "refused", v1alpha1.ReasonForbidden, user, "services")
	if _, err := rc.kube.CoreV1().Services(ns).Get(t.Context(), "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused Service on the remote cluster: %v, want NotFound", err)
	}
}

func testRemoteDriftIsCorrectedByEvents(t *testing.T, rc *remoteCluster) {
	ns := remoteNamespace(t, rc)
	kubeconfigSecret(t, ns, "remote", rc.kubeconfig, nil)
	on := true
	// No interval: only a watch event of the remote cluster can repair.
	createVR(t, ns, "drift", configMap("watched", map[string]string{"a": "1"}), toRemote(rc, "remote"), func(vr *v1alpha1.VidraResource) {
		vr.Spec.Interval = &metav1.Duration{}
		vr.Spec.Destination.ReconcileOnEvents = &on
	})
	waitReady(t, ns, "drift")
	waitRemote(t, rc, configMaps, ns, "watched", "was applied", exists)
	// Every reconcile of the start is counted: each repair below must add
	// one woken by the watch event of the drift.
	before := reconciled(t, ns, "drift")
	repairedOnEvent := func(repairs int) {
		t.Helper()
		waitCount(t, ns, "drift", fmt.Sprintf("a reconcile woken by the watch event of repair %d", repairs), func(by map[controller.Trigger]int) bool {
			return by[controller.TriggerEvent] >= before[controller.TriggerEvent]+repairs
		})
	}

	if err := rc.kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "watched", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRemote(t, rc, configMaps, ns, "watched", "was restored after a delete", exists)
	repairedOnEvent(1)

	cm, err := rc.kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "watched", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["a"] = "edited"
	if _, err := rc.kube.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	waitRemote(t, rc, configMaps, ns, "watched", "was restored after an edit", func(o *unstructured.Unstructured) bool {
		d, _, _ := unstructured.NestedStringMap(o.Object, "data")
		return d["a"] == "1"
	})
	repairedOnEvent(2)
}

func testCRDOnlyOnRemoteClusterIsMapped(t *testing.T, rc *remoteCluster) {
	ns := remoteNamespace(t, rc)
	kubeconfigSecret(t, ns, "remote", rc.kubeconfig, nil)
	file := filepath.Join(t.TempDir(), "crd.yaml")
	if err := os.WriteFile(file, []byte(crdManifest("remote.e2e.vidra.test", "Gizmo")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := testenv.InstallCRDs(t.Context(), rc.env.Config, file); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "remote.e2e.vidra.test", Version: "v1", Resource: "gizmos"}
	if _, err := dyn.Resource(gvr).Namespace(ns).List(t.Context(), metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the kind exists on the local cluster too (err %v); the test would prove nothing", err)
	}
	createVR(t, ns, "crd", "apiVersion: remote.e2e.vidra.test/v1\nkind: Gizmo\nmetadata:\n  name: g1\nspec:\n  size: 2\n", toRemote(rc, "remote"))
	waitReady(t, ns, "crd")
	waitRemote(t, rc, gvr, ns, "g1", "was applied", exists)
	// Drift of it is watched on the remote cluster too.
	if err := rc.dyn.Resource(gvr).Namespace(ns).Delete(t.Context(), "g1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRemote(t, rc, gvr, ns, "g1", "was restored", exists)
}

func testLegacyLabelledSecret(t *testing.T, rc *remoteCluster) {
	ns := remoteNamespace(t, rc)
	host := "127.0.0.1"
	legacy := map[string]string{"cluster-kubeconfig": host}
	// A labelled Secret outside the operator's namespace is not looked at:
	// a tenant must not be able to plant credentials for everyone.
	kubeconfigSecret(t, ns, "planted", rc.kubeconfig, legacy)
	createVR(t, ns, "legacy", configMap("old-style", nil), func(vr *v1alpha1.VidraResource) { vr.Spec.Destination.Server = rc.server() })
	failsWithMessage(t, ns, "legacy", v1alpha1.ReasonDestinationError, "cluster-kubeconfig="+host, operatorNamespace)
	if _, err := rc.kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "old-style", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("applied through a Secret outside the operator's namespace (err %v)", err)
	}

	// The same Secret in the operator's namespace is found, by the host of
	// the server, and the waiting resource is requeued by its creation.
	name := "legacy-" + ns
	kubeconfigSecret(t, operatorNamespace, name, rc.kubeconfig, legacy)
	t.Cleanup(func() {
		_ = kube.CoreV1().Secrets(operatorNamespace).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	waitReady(t, ns, "legacy")
	waitRemote(t, rc, configMaps, ns, "old-style", "was applied", exists)

	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "legacy", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRemoteGone(t, rc, configMaps, ns, "old-style", "was deleted")
	waitVRGone(t, ns, "legacy")
}

// allowSecret lets ServiceAccount sa of ns, on the local cluster, get
// Secret secret of ns.
func allowSecret(t *testing.T, ns, sa, secret string) {
	t.Helper()
	name := "read-" + secret
	if _, err := kube.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secret}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// tokenKubeconfig is a kubeconfig for rc that authenticates with a bearer
// token instead of the admin certificate.
func tokenKubeconfig(t *testing.T, rc *remoteCluster, token string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["remote"] = &clientcmdapi.Cluster{Server: rc.server(), CertificateAuthorityData: rc.env.Config.CAData}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["remote"] = &clientcmdapi.Context{Cluster: "remote", AuthInfo: "user"}
	cfg.CurrentContext = "remote"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func testRotatedSecretIsUsed(t *testing.T, rc *remoteCluster) {
	ns := remoteNamespace(t, rc)
	kubeconfigSecret(t, ns, "remote", rc.kubeconfig, nil)
	createVR(t, ns, "rot", configMap("rotating", map[string]string{"v": "1"}), toRemote(rc, "remote"))
	waitReady(t, ns, "rot")

	// Credentials the remote API server refuses: the next reconcile (which
	// the Secret's change triggers) must use them and fail. The manifest is
	// changed only once that reconcile ran, so that the operator has seen
	// the new Secret: otherwise the change could still go out with the old
	// credentials, before the Secret's informer caught up.
	_, before := reconciles.of(ns, "rot")
	setSecretData(t, ns, "remote", tokenKubeconfig(t, rc, "not-a-valid-token"))
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, n := reconciles.of(ns, "rot")
		return n > before, nil
	})
	if err != nil {
		t.Fatalf("the Secret's change did not requeue the resource: %v", err)
	}
	updateVR(t, ns, "rot", func(vr *v1alpha1.VidraResource) {
		vr.Spec.Manifest = configMap("rotating", map[string]string{"v": "2"})
	})
	waitVR(t, ns, "rot", "failed with the rotated credentials", func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.ObservedGeneration == vr.Generation &&
			// The API server's message for 401 Unauthorized.
			strings.Contains(c.Message, "provide credentials")
	})
	cm, err := rc.kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "rotating", metav1.GetOptions{})
	if err != nil || cm.Data["v"] != "1" {
		t.Fatalf("the object changed with refused credentials: %v %v", cm, err)
	}

	// Rotated back to valid credentials, the resource recovers without any
	// change of its own: the Secret's change requeues it.
	setSecretData(t, ns, "remote", rc.kubeconfig)
	waitReady(t, ns, "rot")
	waitRemote(t, rc, configMaps, ns, "rotating", "got the new data", func(o *unstructured.Unstructured) bool {
		d, _, _ := unstructured.NestedStringMap(o.Object, "data")
		return d["v"] == "2"
	})
}

func testBadKubeconfigIsReported(t *testing.T, rc *remoteCluster) {
	ns := remoteNamespace(t, rc)
	execConfig := clientcmdapi.NewConfig()
	execConfig.Clusters["remote"] = &clientcmdapi.Cluster{Server: rc.server(), CertificateAuthorityData: rc.env.Config.CAData}
	execConfig.AuthInfos["user"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "/bin/true", APIVersion: "client.authentication.k8s.io/v1"}}
	execConfig.Contexts["remote"] = &clientcmdapi.Context{Cluster: "remote", AuthInfo: "user"}
	execConfig.CurrentContext = "remote"
	execData, err := clientcmd.Write(*execConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, data, want string
	}{
		{name: "garbage", data: "this: is: not: a kubeconfig", want: "parse kubeconfig"},
		{name: "exec-plugin", data: string(execData), want: "exec (credential plugins"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kubeconfigSecret(t, ns, tc.name, []byte(tc.data), nil)
			createVR(t, ns, tc.name, configMap("never", nil), toRemote(rc, tc.name))
			vr := failsWithMessage(t, ns, tc.name, v1alpha1.ReasonDestinationError, tc.want, "Secret "+ns+"/"+tc.name)
			if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue {
				t.Errorf("a bad kubeconfig is retried with backoff, so Reconciling should be True: %+v", vr.Status.Conditions)
			}
		})
	}
	t.Run("missing-key", func(t *testing.T) {
		kubeconfigSecret(t, ns, "wrong-key", rc.kubeconfig, nil)
		createVR(t, ns, "wrong-key", configMap("never", nil), toRemote(rc, "wrong-key"), func(vr *v1alpha1.VidraResource) {
			vr.Spec.Destination.KubeconfigSecretRef.Key = "value"
		})
		failsWithMessage(t, ns, "wrong-key", v1alpha1.ReasonDestinationError, `has no key "value"`, "kubeconfig")
	})
	// A kubeconfig for another server than the resource names: its current
	// context must not stand in for the named one.
	t.Run("other-server", func(t *testing.T) {
		kubeconfigSecret(t, ns, "other-server", rc.kubeconfig, nil)
		createVR(t, ns, "other-server", configMap("never", nil), toRemote(rc, "other-server"), func(vr *v1alpha1.VidraResource) {
			vr.Spec.Destination.Server = "https://prod.example.com:6443"
		})
		failsWithMessage(t, ns, "other-server", v1alpha1.ReasonDestinationError,
			"has no context for destination.server https://prod.example.com:6443 (its current context is for "+rc.server()+")")
	})
	if _, err := rc.kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "never", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("applied through a bad kubeconfig (err %v)", err)
	}
}

func testMissingSecret(t *testing.T, rc *remoteCluster) {
	ns := remoteNamespace(t, rc)
	createVR(t, ns, "nosecret", configMap("kept", nil), toRemote(rc, "later"))
	failsWithMessage(t, ns, "nosecret", v1alpha1.ReasonDestinationError, "Secret "+ns+"/later", "does not exist")

	// Its creation is an event: no waiting out the backoff.
	kubeconfigSecret(t, ns, "later", rc.kubeconfig, nil)
	waitReady(t, ns, "nosecret")
	waitRemote(t, rc, configMaps, ns, "kept", "was applied", exists)

	// The Secret gone for good: deletion cannot reach the objects, so it
	// removes the finalizer and says what it left behind.
	if err := kube.CoreV1().Secrets(ns).Delete(t.Context(), "later", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	failsWithMessage(t, ns, "nosecret", v1alpha1.ReasonDestinationError, "does not exist")
	if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), "nosecret", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitVRGone(t, ns, "nosecret")
	waitEvent(t, ns, "nosecret", "LeftBehind", "ConfigMap "+ns+"/kept")
	waitRemote(t, rc, configMaps, ns, "kept", "is left in place", exists)
}

// testOutage stops the remote API server: its resources report it and back
// off, local resources are not slowed, a deletion waits for it (or finishes
// at once when switched to Orphan), and everything recovers when it returns.
// The outage and the deletions are set up before the phases, which only
// check their consequences: any phase runs alone.
func testOutage(t *testing.T, rc *remoteCluster) {
	ns := remoteNamespace(t, rc)
	kubeconfigSecret(t, ns, "remote", rc.kubeconfig, nil)
	// More failing resources than workers: were each to hold a worker, the
	// local resource would wait.
	live := []string{"steady", "r2", "r3", "r4", "r5"}
	for _, name := range append(live, "doomed", "orphaned") {
		createVR(t, ns, name, configMap(name, nil), toRemote(rc, "remote"))
	}
	createVR(t, ns, "local", configMap("local", map[string]string{"a": "1"}))
	for _, name := range append(live, "doomed", "orphaned", "local") {
		waitReady(t, ns, name)
	}

	rc.env.StopAPIServer()
	restarted := false
	start := func() {
		if !restarted {
			restarted = true
			if err := rc.env.StartAPIServer(context.Background()); err != nil {
				t.Fatalf("restart the remote API server: %v", err)
			}
		}
	}
	t.Cleanup(start)
	for _, name := range live {
		requestReconcile(t, ns, name)
	}
	for _, name := range []string{"doomed", "orphaned"} {
		if err := vidra.InfrahubV1alpha1().VidraResources(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The deletion that cannot clean up is unblocked by giving up the
	// objects.
	updateVR(t, ns, "orphaned", func(vr *v1alpha1.VidraResource) { vr.Spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan })

	t.Run("IsReportedWithBackoff", func(t *testing.T) {
		vr := failsWithMessage(t, ns, "steady", v1alpha1.ReasonDestinationError, rc.server(), "unreachable")
		if msg, want := readyMessage(vr), "API server "+rc.server()+" is unreachable: "; !strings.HasPrefix(msg, want) {
			t.Errorf("Ready message %q, want it to start with %q", msg, want)
		}
		if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("an unreachable destination is retried, so Reconciling should be True: %+v", vr.Status.Conditions)
		}
		// Each retry is counted once it has failed. With the backoff's
		// delays doubling from 200ms, the second of the next two waits at
		// least 400ms after the first; without backoff both take a few
		// milliseconds.
		before, _ := reconciles.of(ns, "steady")
		began := time.Now()
		waitCount(t, ns, "steady", "two more retries", func(by map[controller.Trigger]int) bool {
			return by[controller.TriggerRetry] >= before[controller.TriggerRetry]+2
		})
		took := time.Since(began)
		if took < 400*time.Millisecond {
			t.Errorf("two retries in %v; want them backed off", took)
		}
		t.Logf("two retries in %v", took.Round(time.Millisecond))
		if vr, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(t.Context(), "steady", metav1.GetOptions{}); err != nil || isReady(vr) {
			t.Errorf("the resource is Ready with its destination down (err %v)", err)
		}
	})

	t.Run("LocalResourcesKeepReconciling", func(t *testing.T) {
		// The wait's deadline catches a repair that never comes; how soon
		// it comes depends on the machine's load, and is logged.
		start := time.Now()
		if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "local", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitObject(t, configMaps, ns, "local", "was restored", exists)
		t.Logf("local drift repaired in %v during the outage", time.Since(start).Round(time.Millisecond))
	})

	t.Run("DeletionWaitsForTheCluster", func(t *testing.T) {
		waitEvent(t, ns, "doomed", "CleanupFailed", "unreachable")
		// A further attempt, requested, fails too and keeps the finalizer.
		reconciled(t, ns, "doomed")
		vr, err := vidra.InfrahubV1alpha1().VidraResources(ns).Get(t.Context(), "doomed", metav1.GetOptions{})
		if err != nil || !slices.Contains(vr.Finalizers, v1alpha1.Finalizer) {
			t.Fatalf("the deletion did not wait for the cluster: %v (err %v)", vr, err)
		}
	})

	t.Run("OrphanFinishesDeletionAtOnce", func(t *testing.T) {
		waitVRGone(t, ns, "orphaned")
		waitEvent(t, ns, "orphaned", "LeftBehind", "ConfigMap "+ns+"/orphaned")
	})

	start()

	t.Run("RecoversWhenBack", func(t *testing.T) {
		for _, name := range live {
			waitReady(t, ns, name)
		}
		// Drift is corrected on events again.
		if err := rc.kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "steady", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRemote(t, rc, configMaps, ns, "steady", "was restored", exists)
	})

	t.Run("DeletionCompletesWhenBack", func(t *testing.T) {
		waitRemoteGone(t, rc, configMaps, ns, "doomed", "was deleted")
		waitVRGone(t, ns, "doomed")
		waitRemote(t, rc, configMaps, ns, "orphaned", "is left in place", exists)
	})
}

// testHungServer freezes the remote API server (SIGSTOP: connections are
// accepted, nothing is answered). Reconciles of objects in sync read caches
// and the watches wait in silence, so the resource would go on saying it is
// in sync; a requested reconcile asks the server and reports it, and the
// resource recovers by itself when the server answers again.
func testHungServer(t *testing.T, rc *remoteCluster) {
	ns := remoteNamespace(t, rc)
	kubeconfigSecret(t, ns, "remote", rc.kubeconfig, nil)
	createVR(t, ns, "frozen", configMap("frozen", nil), toRemote(rc, "remote"))
	waitReady(t, ns, "frozen")

	pid := rc.env.PIDs()["kube-apiserver"]
	if pid == 0 {
		t.Fatalf("no kube-apiserver process among %v", rc.env.PIDs())
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)

	requestReconcile(t, ns, "frozen")
	failsWithMessage(t, ns, "frozen", v1alpha1.ReasonDestinationError, rc.server(), "unreachable")
	resume()
	waitReady(t, ns, "frozen")
}

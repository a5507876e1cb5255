// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
	"github.com/vidra-operator/vidra/pkg/controller"
)

func gzipped(t *testing.T, text string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bundleConfigMap creates ConfigMap name in ns holding a.yaml as text and
// b.yaml.gz compressed.
func bundleConfigMap(t *testing.T, ns, name, a, b string) *corev1.ConfigMap {
	t.Helper()
	cm, err := kube.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string]string{"a.yaml": a},
		BinaryData: map[string][]byte{"b.yaml.gz": gzipped(t, b)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func fromConfigMap(name string) func(*v1alpha1.VidraResource) {
	return func(vr *v1alpha1.VidraResource) {
		vr.Spec.ManifestFrom = append(vr.Spec.ManifestFrom, v1alpha1.ManifestSource{ConfigMapRef: &v1alpha1.SourceKeyReference{Name: name}})
	}
}

// noInterval turns the safety-net re-check off: whatever happens, a watch
// made it happen.
func noInterval(vr *v1alpha1.VidraResource) { vr.Spec.Interval = &metav1.Duration{} }

func hasData(key, value string) func(*unstructured.Unstructured) bool {
	return func(o *unstructured.Unstructured) bool {
		v, _, _ := unstructured.NestedString(o.Object, "data", key)
		return v == value
	}
}

func TestManifestFromConfigMapIsAppliedWithItsSum(t *testing.T) {
	ns := namespace(t)
	bundleConfigMap(t, ns, "bundle", configMap("plain", map[string]string{"k": "1"}), serviceDoc)
	createVR(t, ns, "app", configMap("inline", map[string]string{"k": "0"}), fromConfigMap("bundle"))
	vr := waitReady(t, ns, "app")
	if vr.Status.ManagedCount != 3 {
		t.Fatalf("managed %d objects, want 3 (one of spec.manifest, two of the ConfigMap): %+v", vr.Status.ManagedCount, vr.Status.ManagedResources)
	}
	waitObject(t, configMaps, ns, "plain", "was applied", hasData("k", "1"))
	waitObject(t, services, ns, "web", "was applied from gzip data", exists)
	if len(vr.Status.ManifestFrom) != 1 || vr.Status.ManifestFrom[0].Name != "bundle" || !strings.HasPrefix(vr.Status.ManifestFrom[0].SHA256, "sha256:") {
		t.Fatalf("status.manifestFrom = %+v, want the ConfigMap with its sum", vr.Status.ManifestFrom)
	}
}

func TestChangedReferencedConfigMapIsAppliedWithoutInterval(t *testing.T) {
	ns := namespace(t)
	bundleConfigMap(t, ns, "bundle", configMap("plain", map[string]string{"k": "1"}), serviceDoc)
	createVR(t, ns, "app", "", fromConfigMap("bundle"), noInterval)
	before := waitReady(t, ns, "app").Status.ManifestFrom[0].SHA256
	// Every reconcile queued so far (the creation's, the first list's) is
	// done: what follows the change was woken by it.
	quiet := reconciled(t, ns, "app")

	cm, err := kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "bundle", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.BinaryData["b.yaml.gz"] = gzipped(t, configMap("plain", map[string]string{"k": "2"}))
	cm.Data["a.yaml"] = serviceDoc
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(t.Context(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitObject(t, configMaps, ns, "plain", "took the ConfigMap's new content", hasData("k", "2"))
	// Woken by the change itself (a retry of an earlier status write may
	// have got there first), which only the watch of the source can tell.
	waitCount(t, ns, "app", "a reconcile woken by the ConfigMap's change", func(by map[controller.Trigger]int) bool {
		return by[controller.TriggerEvent] > quiet[controller.TriggerEvent]
	})
	vr := waitVR(t, ns, "app", "recorded the new content's sum", func(vr *v1alpha1.VidraResource) bool {
		return len(vr.Status.ManifestFrom) == 1 && vr.Status.ManifestFrom[0].SHA256 != before && isReady(vr)
	})
	if vr.Status.ManagedCount != 2 {
		t.Errorf("managed %d objects, want 2", vr.Status.ManagedCount)
	}
}

func TestMissingReferenceIsReportedAndPrunesNothing(t *testing.T) {
	ns := namespace(t)
	bundleConfigMap(t, ns, "bundle", configMap("plain", map[string]string{"k": "1"}), serviceDoc)
	createVR(t, ns, "app", configMap("inline", nil), fromConfigMap("bundle"), noInterval)
	waitReady(t, ns, "app")

	if err := kube.CoreV1().ConfigMaps(ns).Delete(t.Context(), "bundle", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	vr := failsWithMessage(t, ns, "app", v1alpha1.ReasonSourceUnavailable, "ConfigMap bundle", "not found")
	waitEvent(t, ns, "app", v1alpha1.ReasonSourceUnavailable, "ConfigMap bundle")
	if vr.Status.ManagedCount != 3 {
		t.Errorf("the inventory holds %d objects while the source is missing, want the 3 applied", vr.Status.ManagedCount)
	}
	waitObject(t, configMaps, ns, "plain", "is kept while its source is missing", exists)
	waitObject(t, services, ns, "web", "is kept while its source is missing", exists)

	// Created again, it wakes the resource through its watch.
	bundleConfigMap(t, ns, "bundle", configMap("plain", map[string]string{"k": "1"}), serviceDoc)
	waitReady(t, ns, "app")
}

func TestManifestFromIsReadAsTheResourcesServiceAccount(t *testing.T) {
	ns := namespace(t)
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grant := func(name string, rule rbacv1.PolicyRule) {
		if _, err := kube.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "deployer", Namespace: ns}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// It may write Services, and read no ConfigMap.
	grant("services", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}})
	secret, err := kube.CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "private"}, Data: map[string][]byte{"web.yaml": []byte(serviceDoc)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createVR(t, ns, "app", "", func(vr *v1alpha1.VidraResource) {
		vr.Spec.ServiceAccountName = "deployer"
		vr.Spec.ManifestFrom = []v1alpha1.ManifestSource{{SecretRef: &v1alpha1.SourceKeyReference{Name: secret.Name, Key: "web.yaml"}}}
	})
	// The operator may read every Secret; the resource's ServiceAccount
	// may not read this one, so neither may the resource.
	failsWithMessage(t, ns, "app", v1alpha1.ReasonSourceUnavailable, "Secret private key web.yaml", "may not read it")
	waitEvent(t, ns, "app", v1alpha1.ReasonSourceUnavailable, "Secret private")

	grant("read-private", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"private"}, Verbs: []string{"get"}})
	// Granting a Role changes nothing Vidra watches: ask.
	requestReconcile(t, ns, "app")
	waitReady(t, ns, "app")
	waitObject(t, services, ns, "web", "was applied from the Secret", exists)
}

func TestGzipBase64ManifestIsApplied(t *testing.T) {
	ns := namespace(t)
	enc := base64.StdEncoding.EncodeToString(gzipped(t, configMap("zipped", map[string]string{"k": "z"})))
	createVR(t, ns, "app", enc, func(vr *v1alpha1.VidraResource) { vr.Spec.ManifestEncoding = v1alpha1.ManifestEncodingGzipBase64 })
	waitReady(t, ns, "app")
	waitObject(t, configMaps, ns, "zipped", "was applied from gzip+base64", hasData("k", "z"))
}

func TestEmptyManifestWithoutManifestFromIsRefused(t *testing.T) {
	ns := namespace(t)
	_, err := vidra.InfrahubV1alpha1().VidraResources(ns).Create(t.Context(), &v1alpha1.VidraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "empty"},
	}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "may not both be empty") {
		t.Fatalf("create with neither manifest nor manifestFrom: %v, want the CRD's refusal", err)
	}
}

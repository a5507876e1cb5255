// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package reliability_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/vidra-operator/vidra/internal/testenv"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// The install serves /metrics over TLS to bearer tokens allowed to get it.
// Run as the install's ServiceAccount under the install's RBAC (the default
// one, and the restricted one, which lists the operator's rules anew), with
// the install's --metrics-secure, the operator answers a ServiceAccount
// bound to vidra-metrics-reader with the metrics, a request without a token
// with 401, and a ServiceAccount without the binding with 403; plain HTTP
// gets no metrics at all.
func TestTheInstallsMetricsAnswerOnlyAllowedTokens(t *testing.T) {
	for _, dir := range []string{"manifests", "deploy/restricted"} {
		t.Run(dir, func(t *testing.T) { metricsAnswerOnlyAllowedTokens(t, dir) })
	}
}

func metricsAnswerOnlyAllowedTokens(t *testing.T, dir string) {
	if args := deploymentArgs(t, dir); !slices.Contains(args, "--metrics-secure") {
		t.Fatalf("%s runs the operator with %v, without --metrics-secure", dir, args)
	}
	ns := namespace(t)
	op := startAsTheInstall(t, ns, dir, "--metrics-secure")

	// The platform binds its scraper; installRBAC named the install's
	// ClusterRoles after the test's namespace.
	for _, name := range []string{"scraper", "stranger"} {
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	binding := "vidra-metrics-scraper-" + ns
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "vidra-metrics-reader-" + ns},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding, metav1.DeleteOptions{})
	})

	// A reconcile, so that vidra_reconciles_total has a sample (whether it
	// applies: the restricted install refuses it).
	createInstallVR(t, ns, "app", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\n", "")
	testenv.WaitVR(t, vidra, ns, "app", "was reconciled", func(vr *v1alpha1.VidraResource) bool {
		c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.ObservedGeneration == vr.Generation
	})

	scraperToken, strangerToken := serviceAccountToken(t, ns, "scraper"), serviceAccountToken(t, ns, "stranger")
	url := "https://" + op.MetricsAddr + "/metrics"
	// The RBAC authorizer learns of the binding from its watch: until then
	// the scraper is refused, and the refusal is remembered for 10 s.
	var code int
	var body string
	if err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		code, body = scrapeSecure(ctx, t, url, scraperToken)
		return code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("the bound scraper: status %d, want 200: %s", code, cut(body))
	}
	if !strings.Contains(body, "vidra_reconciles_total") {
		t.Errorf("the bound scraper's answer lacks vidra_reconciles_total:\n%s", cut(body))
	}

	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a token the API server did not issue", "made-up", http.StatusUnauthorized},
		{"a ServiceAccount without the binding", strangerToken, http.StatusForbidden},
	} {
		if code, body := scrapeSecure(t.Context(), t, url, tc.token); code != tc.want || strings.Contains(body, "vidra_") {
			t.Errorf("%s: status %d, want %d: %s", tc.name, code, tc.want, cut(body))
		}
	}

	log, err := os.ReadFile(op.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{scraperToken, strangerToken} {
		if strings.Contains(string(log), token) {
			t.Error("the operator's log holds a scraper's token")
		}
	}

	// Plain HTTP on the metrics port gets no metrics.
	resp, err := http.Get("http://" + op.MetricsAddr + "/metrics")
	if err == nil {
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(data), "vidra_") {
			t.Errorf("plain HTTP: status %d: %s", resp.StatusCode, cut(string(data)))
		}
	}
}

// deploymentArgs returns the arguments of the operator's container in the
// kustomization in dir.
func deploymentArgs(t *testing.T, dir string) []string {
	t.Helper()
	for _, u := range renderInstall(t, dir) {
		if u.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if m, ok := c.(map[string]any); ok && m["name"] == "vidra" {
				args, _, _ := unstructured.NestedStringSlice(m, "args")
				return args
			}
		}
	}
	t.Fatalf("%s renders no Deployment with a container vidra", dir)
	return nil
}

// serviceAccountToken asks the TokenRequest API for a token of the
// ServiceAccount, for the API server's own audience, as a Pod gets one.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of ServiceAccount %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// scrapeSecure gets url over HTTPS with token as bearer (none if empty),
// without verifying the operator's self-signed certificate.
func scrapeSecure(ctx context.Context, t *testing.T, url, token string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12},
	}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Sprintf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// cut shortens a scrape's answer for a message: its start tells what it is.
func cut(body string) string {
	if len(body) > 300 {
		return body[:300] + "..."
	}
	return body
}
